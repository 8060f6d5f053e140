//go:build !unix

package dindtest

import "io/fs"

func inodeOf(fs.FileInfo) (inodeKey, bool) { return inodeKey{}, false }
