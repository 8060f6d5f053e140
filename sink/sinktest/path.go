package sinktest

import (
	"errors"
	"io/fs"
	"strings"
)

// errNotDir reports an intermediate path component that is not a directory.
var errNotDir = errors.New("not a directory")

// checkPath enforces the sink package's path rules: slash-separated, relative,
// cleaned, "." for the root.
func checkPath(op, p string) error {
	if p == "." {
		return nil
	}
	if p == "" || strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return &fs.PathError{Op: op, Path: p, Err: fs.ErrInvalid}
	}
	for _, e := range strings.Split(p, "/") {
		if e == "" || e == "." || e == ".." {
			return &fs.PathError{Op: op, Path: p, Err: fs.ErrInvalid}
		}
	}
	return nil
}

// split returns the path's elements; the root has none.
func split(p string) []string {
	if p == "." {
		return nil
	}
	return strings.Split(p, "/")
}

// join joins a directory path and a name.
func join(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}
