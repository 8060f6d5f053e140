package gvx_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"z.gfire.dev/gvx/internal/hostcpu"
	"z.gfire.dev/gvx/pkg/gvx"
	"z.gfire.dev/gvx/spec"
)

// TestHostCPUs: Config.HostCPUs reaches rungv run (--host-cpus), whose
// threads and children are then allowed on that CPU only.
func TestHostCPUs(t *testing.T) {
	have, err := hostcpu.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	if len(have) < 2 {
		t.Skipf("needs 2 CPUs to tell a pinned episode from an unpinned one; this process may use %d", len(have))
	}
	cpu := have[0]
	t.Setenv("TMPDIR", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := newOutput()
	sp := &spec.Spec{Version: spec.Version, Image: imageRef, Network: spec.NetworkNone,
		Entrypoint: []string{"sh"}, Args: []string{"-c", "echo up; exec sleep 1000"}}
	sb, err := gvx.NewFromSpec(ctx, sp, gvx.Config{Rungv: rungvBin, Stdout: out, HostCPUs: []int{cpu}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	go sb.Run(ctx)
	out.waitFor(t, "up")
	pids := rungvChildren(os.Getpid())
	if len(pids) != 1 {
		t.Fatalf("rungv children of this test: %v, want one", pids)
	}
	want := strconv.Itoa(cpu)
	tasks, _ := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pids[0]), "task"))
	for _, task := range tasks {
		got, err := hostcpu.StatusList(filepath.Join("/proc", strconv.Itoa(pids[0]), "task", task.Name(), "status"))
		if err != nil {
			continue // ended meanwhile
		}
		if got != want {
			t.Errorf("rungv's thread %s may run on CPUs %s, want %s only", task.Name(), got, want)
		}
	}
	if len(tasks) == 0 {
		t.Error("rungv has no threads to check")
	}
}
