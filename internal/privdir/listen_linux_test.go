package privdir

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"z.gfire.dev/gvx/internal/hostiletest"
)

// TestListenUnix: the socket gets its mode and identity, a path longer
// than a socket address still works (it is bound through a descriptor),
// nothing at the path is replaced, and no temporary directory is left.
func TestListenUnix(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, strings.Repeat("d", 100))
	if err := os.Mkdir(long, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(dir, "s.sock"), filepath.Join(long, "s.sock")} {
		l, id, err := ListenUnix(path, 0o640)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		st, err := os.Lstat(path)
		if err != nil || st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o640 {
			t.Errorf("%s: %v %v", path, st.Mode(), err)
		} else if sys := st.Sys().(*syscall.Stat_t); sys.Ino != id.Ino || uint64(sys.Dev) != id.Dev {
			t.Errorf("%s: identity %+v, the file is %d/%d", path, id, sys.Dev, sys.Ino)
		}
		if len(path) < 100 {
			c, err := net.Dial("unix", path)
			if err != nil {
				t.Errorf("dial %s: %v", path, err)
			} else {
				c.Close()
			}
		}
		ents, _ := os.ReadDir(filepath.Dir(path))
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".gvx-sock-") {
				t.Errorf("left %s", e.Name())
			}
		}
		l.Close()
		if _, err := os.Lstat(path); err != nil {
			t.Errorf("Close unlinked %s: %v", path, err)
		}
		// Something at the path: kept, and an error.
		if _, _, err := ListenUnix(path, 0o600); !errors.Is(err, os.ErrExist) {
			t.Errorf("over %s: %v", path, err)
		}
		if st2, err := os.Lstat(path); err != nil || !os.SameFile(st, st2) {
			t.Errorf("%s was replaced", path)
		}
	}
}

// TestListenUnixSwapRace is another local user who owns the socket's
// directory and swaps every new entry in it for a symlink to a file of
// root's, the moment inotify reports it: 200 sockets later the file's mode
// and content are what they were. (Chmod by path after the bind lost this
// race within a few tries.)
func TestListenUnixSwapRace(t *testing.T) {
	dir, target := hostiletest.NobodyDir(t)
	swaps := hostiletest.SymlinkSwapper(t, dir, target)
	path := filepath.Join(dir, "s.sock")
	for range 200 {
		if l, _, err := ListenUnix(path, 0o600); err == nil {
			l.Close()
		}
		os.Remove(path)
	}
	hostiletest.VictimUnchanged(t, target)
	if swaps() == 0 {
		t.Fatal("the swapper never acted: the test proves nothing")
	}
	t.Logf("%d swaps", swaps())
}
