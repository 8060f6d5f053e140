//go:build !unix

package dindtest

import "io/fs"

func inodeOf(fs.FileInfo) (inodeKey, bool) { return inodeKey{}, false }

func ownerOf(fs.FileInfo) (int, bool) { return 0, false }

// stampOf has no inode here: every blob is hashed each time.
func stampOf(fi fs.FileInfo) blobStamp { return blobStamp{} }
