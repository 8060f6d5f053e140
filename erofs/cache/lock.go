package cache

import (
	"fmt"
	"os"
)

// fileLock is an advisory whole-file lock (flock on Unix, LockFileEx on
// Windows) held through an open file; closing the file releases it, and so
// does the death of the process.
type fileLock struct{ f *os.File }

func lock(path string, exclusive bool) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cache: lock: %w", err)
	}
	if err := lockFD(f, exclusive); err != nil {
		f.Close()
		return nil, fmt.Errorf("cache: lock %s: %w", path, err)
	}
	return &fileLock{f: f}, nil
}

func (l *fileLock) unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
