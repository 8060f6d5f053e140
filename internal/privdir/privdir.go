package privdir

import (
	"fmt"
	"os"
)

// Want is what a trusted directory must be. The zero value is the usual
// rule: owned by the caller, writable by no one else.
type Want struct {
	// Root also accepts a directory owned by root, for a cache root
	// shares read-only with other users.
	Root bool
	// Perm, if not zero, is the exact permission the directory must have
	// (0700 for a default inside a shared temporary directory, where
	// nothing but the owner should even list it).
	Perm os.FileMode
}

// Error is a directory refused: what it is, who owns it, its mode.
type Error struct {
	Path string
	// Why is set when the path is not a directory at all ("is a symlink").
	Why string
	// UID and Mode are the directory's owner and permission bits.
	UID  int
	Mode os.FileMode
	// Want is the rule it failed; Self the caller's effective uid.
	Want Want
	Self int
	// File is set for a file in a trusted directory (Dir.OpenFile).
	File bool
}

func (e *Error) Error() string {
	if e.Why != "" && e.File {
		return fmt.Sprintf("%s %s: a file in a trusted directory must be a regular file", e.Path, e.Why)
	}
	if e.Why != "" {
		return fmt.Sprintf("%s %s, not a directory: a trusted directory must be a real directory", e.Path, e.Why)
	}
	owner := fmt.Sprintf("yours (uid %d)", e.Self)
	if e.Want.Root && e.Self != 0 {
		owner = fmt.Sprintf("yours (uid %d) or root's", e.Self)
	}
	rule := "not writable by others"
	if e.Want.Perm != 0 {
		rule = fmt.Sprintf("mode %04o exactly", e.Want.Perm)
	}
	return fmt.Sprintf("%s is owned by uid %d, mode %04o: it must be %s and %s", e.Path, e.UID, e.Mode, owner, rule)
}

// Check refuses path unless it is a directory (not a symlink to one)
// owned by the caller and not writable by group or others.
func Check(path string) error { return Want{}.Check(path) }

// Ensure makes path (and missing parents, mode 0700) if it is missing,
// then checks it as Check does.
func Ensure(path string) error { return Want{}.Ensure(path) }

// Ensure makes path (and missing parents, mode 0700) if it is missing,
// then checks it against w.
func (w Want) Ensure(path string) error {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return err
	}
	return w.Check(path)
}

// ok reports whether a directory owned by uid with permission bits perm
// meets w, for a caller of effective uid self.
func (w Want) ok(uid int, perm os.FileMode, self int) bool {
	if uid != self && !(w.Root && uid == 0) {
		return false
	}
	if w.Perm != 0 {
		return perm == w.Perm
	}
	return perm&0o022 == 0
}
