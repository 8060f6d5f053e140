//go:build !linux

package gvx

// unsharedBytes is unknown here (no FIEMAP).
func unsharedBytes(string) int64 { return -1 }
