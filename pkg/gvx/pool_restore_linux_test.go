package gvx_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/pkg/gvx"
	"z.gfire.dev/gvx/spec"
)

// TestWarmRestore: a warm pool that refills by restoring a checkpoint
// (PoolConfig.Checkpoint) hands out episodes that each continue the saved
// guest's counter from the value after the save, on a clone of their own
// (distinct files, the companion volume untouched), once each; Close
// leaves nothing behind.
func TestWarmRestore(t *testing.T) {
	need(t)
	poolEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir, mode := poolDirs(t)
	vol := filepath.Join(dir, "boot.ext4")
	makeGolden(t, vol)
	cp, out := checkpointSpec(t, ctx, counterSpec(spec.Mount{Type: spec.MountVolume, Source: vol, Target: "/data"}), dir, `(?m)^c5$`)
	c := counters(out.String())
	saved := c[len(c)-1]
	companion := volumeNames(t, cp.Spec.Mounts[0].Source)

	scratch := filepath.Join(dir, "episodes")
	before := takeResidue(t, scratch)
	p, err := gvx.NewPool(gvx.PoolConfig{
		Checkpoint: cp, ScratchDir: scratch, CloneMode: mode, Warm: 2,
		Base:  gvx.Config{Rungv: rungvBin},
		Ready: func(ctx context.Context, ep *gvx.Episode) error { return ep.WaitOutput(ctx, "c") },
	})
	if err != nil {
		t.Fatal(err)
	}
	waitWarm(t, p)
	seen := map[string]bool{}
	for i := range 3 {
		ep, err := p.Claim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if seen[ep.Volume] {
			t.Fatalf("clone %s handed out twice", ep.Volume)
		}
		seen[ep.Volume] = true
		if err := ep.WaitOutput(ctx, "\n"); err != nil {
			t.Fatal(err)
		}
		if got := counters(string(ep.Stdout())); len(got) == 0 || got[0] != saved+1 {
			t.Errorf("claim %d: counter starts at %v, want %d (the checkpoint saw %d)", i, got, saved+1, saved)
		}
		if err := ep.Sandbox.Close(); err != nil && !strings.Contains(err.Error(), "closed") {
			t.Log(err)
		}
		ep.Close()
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if got := volumeNames(t, cp.Spec.Mounts[0].Source); strings.Join(got, " ") != strings.Join(companion, " ") {
		t.Errorf("the companion volume changed: %v → %v", companion, got)
	}
	scratchEmpty(t, scratch)
	// A seccomp-only episode has no supervisor: one killed (Close) leaves
	// its state directory to the next rungv start's sweep (docs/runtime.md).
	if out, err := exec.Command(rungvBin, "run", "--isolation", "seccomp-only", "--network", "none", imageRef, "true").CombinedOutput(); err != nil {
		t.Fatalf("rungv run true: %v: %s", err, out)
	}
	before.check(t)

	// A checkpoint that publishes nothing refuses sockets it cannot have.
	if _, err := gvx.NewPool(gvx.PoolConfig{Checkpoint: cp, ScratchDir: scratch, Base: gvx.Config{Rungv: rungvBin}, Sockets: map[string]int{"docker": 2375}}); err == nil || !strings.Contains(err.Error(), "does not publish guest port 2375") {
		t.Errorf("NewPool with a socket the checkpoint lacks: %v", err)
	}
	if _, err := gvx.NewPool(gvx.PoolConfig{Checkpoint: cp, Golden: vol, ScratchDir: scratch, Base: gvx.Config{Rungv: rungvBin}}); err == nil || !strings.Contains(err.Error(), "leave Golden and Spec empty") {
		t.Errorf("NewPool with Checkpoint and Golden: %v", err)
	}
}
