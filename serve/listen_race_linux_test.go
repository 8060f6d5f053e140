package serve_test

import (
	"os"
	"path/filepath"
	"testing"

	"z.gfire.dev/gvx/internal/hostiletest"
	"z.gfire.dev/gvx/serve"
)

// TestListenUnixSwapRace: rungv serve --socket in a directory another
// local user (nobody) owns. They watch it with inotify and swap each new
// entry (the socket under its temporary name) for a symlink to a file of
// root's before the server can chmod it. In 200 tries the file's mode and
// content never change. (A predictable temporary name, chmod'ed by path,
// lost this race.)
func TestListenUnixSwapRace(t *testing.T) {
	dir, victim := hostiletest.NobodyDir(t)
	swaps := hostiletest.SymlinkSwapper(t, dir, victim)
	path := filepath.Join(dir, "serve.sock")
	ok := 0
	for range 200 {
		if ln, err := serve.ListenUnix(path); err == nil {
			ok++
			ln.Close()
		}
		os.Remove(path)
	}
	hostiletest.VictimUnchanged(t, victim)
	if swaps() == 0 {
		t.Fatal("the other user never swapped anything: the test proves nothing")
	}
	t.Logf("%d of 200 sockets made, %d entries swapped", ok, swaps())
}
