package goldencmd

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoGVisor: build-golden reaches the runtime through pkg/gvx, which
// runs the rungv binary; gvx-vol-tools, the binary holding build-golden,
// must not link gVisor (gvx-vol's verbs start in milliseconds).
func TestNoGVisor(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "z.gfire.dev/gvx/cmd/gvx-vol/gvx-vol-tools").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "gvisor.dev/") || p == "z.gfire.dev/gvx/runtime" {
			t.Fatalf("gvx-vol-tools depends on %s", p)
		}
	}
}
