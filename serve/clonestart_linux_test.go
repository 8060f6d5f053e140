package serve_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/reflink"
	"z.gfire.dev/gvx/serve"
)

// TestCloneAlwaysRefusedAtStart: a server that requires reflinks
// (RequireReflink: rungv serve --clone always) on a state dir whose filesystem cannot reflink (a tmpfs) is
// refused by New, naming --clone auto — not started to answer 500 to its
// first golden create; in mode auto it starts, and so it does with
// the zero Config (rungv serve without --clone always), logging a warning
// that names the cost and the fix.
func TestCloneAlwaysRefusedAtStart(t *testing.T) {
	dir := shortDir(t)
	if os.Geteuid() == 0 {
		if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=16m"); err != nil {
			t.Fatalf("mount tmpfs: %v", err)
		}
		t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	} else if ok, err := reflink.Supported(dir); err != nil || ok {
		t.Skipf("not root (no tmpfs to mount) and %s can reflink (%v): nothing to refuse", dir, err)
	}
	state := filepath.Join(dir, "st")
	srv, err := serve.New(serve.Config{StateDir: state, Rungv: "/bin/true", RequireReflink: true})
	if err == nil {
		srv.Close()
		t.Fatal("New with clone mode always on a tmpfs state dir started")
	}
	if !strings.Contains(err.Error(), "--clone auto") || !strings.Contains(err.Error(), state) {
		t.Errorf("New: %v: want the state dir and --clone auto named", err)
	}
	srv, err = serve.New(serve.Config{StateDir: state, Rungv: "/bin/true", CloneMode: reflink.Auto})
	if err != nil {
		t.Fatalf("New with clone mode auto: %v", err)
	}
	srv.Close()
	var logged []string
	srv, err = serve.New(serve.Config{StateDir: state, Rungv: "/bin/true",
		Logf: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }})
	if err != nil {
		t.Fatalf("New without RequireReflink: %v", err)
	}
	srv.Close()
	if w := strings.Join(logged, "\n"); !strings.Contains(w, "warning: state dir "+state+" cannot clone") || !strings.Contains(w, "--clone auto") {
		t.Errorf("New without RequireReflink logged %q: want the warning naming the state dir and --clone auto", w)
	}
}
