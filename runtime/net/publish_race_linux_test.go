package episodenet

import (
	"os"
	"path/filepath"
	"testing"

	"z.gfire.dev/gvx/internal/hostiletest"
	"z.gfire.dev/gvx/spec"
)

// TestPublishSocketSwapRace: -p unix:PATH in a directory another local
// user (nobody) owns. They watch it with inotify and swap each new entry
// for a symlink to a file of root's before rungv (root) can set the
// socket's mode. In 200 tries the file's mode and content never change:
// the socket gets its mode in a private directory, by name there, and is
// only then renamed into place. (bind, Lstat, chmod by path lost within a
// few tries.)
func TestPublishSocketSwapRace(t *testing.T) {
	dir, victim := hostiletest.NobodyDir(t)
	swaps := hostiletest.SymlinkSwapper(t, dir, victim)
	path := filepath.Join(dir, "agent.sock")
	ok := 0
	for range 200 {
		pp := &publishedPort{port: spec.Port{HostSocket: path, GuestPort: 80}}
		if err := pp.listenUnix(); err == nil {
			ok++
			pp.ln.Close()
		}
		os.Remove(path)
	}
	hostiletest.VictimUnchanged(t, victim)
	if swaps() == 0 {
		t.Fatal("the other user never swapped anything: the test proves nothing")
	}
	t.Logf("%d of 200 sockets made, %d entries swapped", ok, swaps())
}
