//go:build !linux

package gvx

// treeMemory is unknown here.
func treeMemory(int) (int64, bool) { return -1, false }
