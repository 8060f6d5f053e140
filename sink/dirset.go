package sink

import (
	"errors"
	"fmt"
)

// ErrDirLinked reports a directory a tree walk reached a second time: a
// hard link to a directory. Linux gives a directory exactly one parent, so
// only a crafted or damaged volume or image has one, and it makes the tree
// a walk sees infinite (a link to an ancestor: a cycle) or exponentially
// large (directories linked twice, nested: a shared subtree whose paths
// multiply). Walkers enter each directory once (DirSet) and stop with a
// *DirLinkError, which unwraps to ErrDirLinked.
var ErrDirLinked = errors.New("sink: a directory is reached twice (a hard link to a directory)")

// DirLinkError names a directory a walk reached a second time.
type DirLinkError struct {
	Path  string // where the walk met it again
	First string // where the walk entered it first
	Ino   uint64 // its Header.Ino
}

func (e *DirLinkError) Error() string {
	return fmt.Sprintf("sink: directory %q (inode %d) is the directory %q again: a hard link to a directory "+
		"(a cycle or a shared subtree), which only a corrupt or crafted tree has; check the volume or image (gvx-vol fsck, gvx-vol erofs check)",
		e.Path, e.Ino, e.First)
}

// Unwrap makes errors.Is(err, ErrDirLinked) true.
func (e *DirLinkError) Unwrap() error { return ErrDirLinked }

// DirSet records the directories a walk has entered, by Header.Ino, so it
// enters each once: the walk's work is then bounded by the number of
// directory entries in the tree, whatever links a crafted tree holds.
// Sources give every directory its own Ino (ext4lite: the inode number;
// EROFS: the nid; host directories: the inode number, made distinct across
// the mounts below the root). The zero value is not usable; make one with
// make(DirSet).
type DirSet map[uint64]string

// Enter records directory h, met at path p; it returns a *DirLinkError if
// the walk entered h's Ino before. Headers of other types are ignored.
func (s DirSet) Enter(p string, h *Header) error {
	if h.Type() != TypeDir {
		return nil
	}
	if first, ok := s[h.Ino]; ok {
		return &DirLinkError{Path: p, First: first, Ino: h.Ino}
	}
	s[h.Ino] = p
	return nil
}
