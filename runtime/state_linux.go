package runtime

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The episode's private state directory: $TMPDIR/rungv-<id>, mode 0700,
// holding runsc's state, the bundle, the volume binds and what a later
// start needs to clean up after an episode whose host side and supervisor
// were both killed (a job manager's cgroup kill, the OOM killer):
//
//	lock          flock'd (exclusive) for as long as the host side or the
//	              supervisor lives; free means the episode is dead
//	sockets.json  the -p unix: socket files it created (publishedSocket)
//	cgroups.json  its host cgroup directories
//
// Every Run first sweeps its TMPDIR: a rungv-* directory of the caller's
// whose lock is free is cleaned up (sockets still the same inode, empty
// cgroups, the directory). A directory is made as .rungv-new-*, locked, then
// renamed, so a sweeper never meets a live episode's directory unlocked.

const (
	stateLock    = "lock"
	stateSockets = "sockets.json"
	stateCgroups = "cgroups.json"
	statePrefix  = "rungv-"
	stateNew     = ".rungv-new-"
)

// newStateDir makes and locks the state directory of episode id. The
// returned lock must stay open (and be inherited by the supervisor) for
// the episode's life.
func newStateDir(id string) (string, *os.File, error) {
	tmp, err := os.MkdirTemp("", stateNew)
	if err != nil {
		return "", nil, err
	}
	lock, err := os.OpenFile(filepath.Join(tmp, stateLock), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		err = unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	}
	dir := filepath.Join(filepath.Dir(tmp), statePrefix+id)
	if err == nil {
		err = os.Rename(tmp, dir)
	}
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		os.RemoveAll(tmp)
		return "", nil, err
	}
	return dir, lock, nil
}

// writeStateJSON records v in the state directory for a later sweep.
func writeStateJSON(state, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(state, name), b, 0o600)
}

// sweepStale cleans up after dead episodes of this user in $TMPDIR. It
// never fails: what it cannot remove stays for the next one.
func sweepStale() {
	tmp := os.TempDir()
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, statePrefix):
			sweepState(filepath.Join(tmp, name))
		case strings.HasPrefix(name, stateNew):
			// Killed between mkdir and rename (a few microseconds): old.
			if st, err := os.Lstat(filepath.Join(tmp, name)); err == nil && ownedDir(st) && time.Since(st.ModTime()) > time.Minute {
				os.RemoveAll(filepath.Join(tmp, name))
			}
		}
	}
}

func ownedDir(st os.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && st.IsDir() && int(sys.Uid) == os.Getuid()
}

// sweepState cleans up dir if it is a dead episode's.
func sweepState(dir string) {
	st, err := os.Lstat(dir)
	if err != nil || !ownedDir(st) {
		return
	}
	lock, err := os.OpenFile(filepath.Join(dir, stateLock), os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return // not a state directory this version made
	}
	defer lock.Close()
	if unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return // alive
	}
	if b, err := os.ReadFile(filepath.Join(dir, stateSockets)); err == nil {
		removeSockets(publishedSockets(string(b)))
	}
	var cgs []string
	if b, err := os.ReadFile(filepath.Join(dir, stateCgroups)); err == nil && json.Unmarshal(b, &cgs) == nil {
		for _, d := range cgs {
			if strings.HasPrefix(filepath.Base(d), "gvx-") {
				if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
					continue
				}
			}
		}
	}
	os.RemoveAll(dir)
}
