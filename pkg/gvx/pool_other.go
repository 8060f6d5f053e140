//go:build !linux

package gvx

// unsharedBytes is unknown here (no FIEMAP).
func unsharedBytes(string) int64 { return -1 }

// processGone is never sure here: stale clones are kept.
func processGone(int) bool { return false }
