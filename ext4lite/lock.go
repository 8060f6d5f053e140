package ext4lite

import (
	"errors"
	"os"
)

// ErrInUse reports a volume file another process (or another open file in
// this one) holds: a running episode, a gvx-vol command. Two writers on
// one ext4 file would corrupt it.
var ErrInUse = errors.New("ext4lite: volume file in use by another writer")

// LockFile takes an advisory lock on f without waiting: exclusive for a
// writer, shared for a reader that must keep writers out (rungv's
// read-only volume mounts). It fails with ErrInUse when a conflicting lock
// is held. Open and Create take the exclusive lock for read-write volumes;
// read-only opens take none, so a running episode's volume can still be
// inspected (gvx-vol ls, cat, info). The lock goes with the file's close.
func LockFile(f *os.File, exclusive bool) error {
	return lockFile(f, exclusive)
}
