package runtime

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRemoveStateKeepsLiveCgroupRecord: an episode's state directory is
// not removed while a cgroup its record names is still there (a killed
// supervisor never removed it): the lock file and the record stay for GC.
// Once the cgroup is gone, the directory goes. Before, the record went
// with the directory and nothing found the cgroups again.
func TestRemoveStateKeepsLiveCgroupRecord(t *testing.T) {
	tmp := t.TempDir()
	state := filepath.Join(tmp, statePrefix+"0123456789ab")
	cg := filepath.Join(tmp, "cgroup", "gvx-0123456789ab") // stands for a cgroup directory
	for _, d := range []string{state, cg} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(state, stateLock), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeStateJSON(state, stateCgroups, []string{cg}); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(state, "runsc"), 0o700); err != nil {
		t.Fatal(err)
	}
	removeState(state)()
	for _, f := range []string{stateLock, stateCgroups} {
		if _, err := os.Stat(filepath.Join(state, f)); err != nil {
			t.Errorf("with its cgroup still there, the state directory lost %s: %v", f, err)
		}
	}
	if err := os.Remove(cg); err != nil {
		t.Fatal(err)
	}
	removeState(state)()
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("with its cgroup gone, the state directory stays: %v", err)
	}
}
