//go:build !linux

package hostdir

// devIndex is Linux's only (dir_linux.go): elsewhere Header.Ino is the
// raw inode number (darwin) or a path hash, and nothing uses the index.
type devIndex struct{}
