package runtimetest

import (
	"encoding/json"
	"os"
	"os/exec"
	"testing"
)

// NeedPatch skips t, saying so, when the rungv binary at rungv was built
// without gVisor patch name (a plain go build; scripts/build.sh and
// cmd/gvisorpatch's env build with the series), and fails it when rungv
// info does not know the patch at all. GVX_TEST_UNPATCHED=1 runs t
// anyway, to see it fail.
func NeedPatch(t testing.TB, rungv, name string) {
	t.Helper()
	out, err := exec.Command(rungv, "info", "--json").Output()
	if err != nil {
		t.Fatalf("rungv info --json: %v", err)
	}
	var info struct {
		Patches []struct {
			Name    string `json:"name"`
			Applied bool   `json:"applied"`
			Lacks   string `json:"lacks"`
		} `json:"gvisor_patches"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("rungv info --json: %v\n%s", err, out)
	}
	for _, p := range info.Patches {
		if p.Name != name {
			continue
		}
		if !p.Applied && os.Getenv("GVX_TEST_UNPATCHED") == "" {
			t.Skipf("rungv was built without gVisor patch %s (a plain go build), so it lacks: %s; build with scripts/build.sh or eval \"$(GOWORK=off go run ./cmd/gvisorpatch env)\" (GVX_TEST_UNPATCHED=1 runs it anyway, to see it fail)", name, p.Lacks)
		}
		return
	}
	t.Fatalf("rungv info --json does not list gVisor patch %s:\n%s", name, out)
}
