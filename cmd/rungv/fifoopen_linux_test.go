package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestFIFOOpenRestarted: a blocking open(2) of a FIFO that a signal with
// an SA_RESTART handler interrupts is restarted, as on Linux (patch
// 0017-fifo-open-restart), in both isolations. Without it the open failed
// with EINTR, and runc init's open of its exec FIFO with it (Go's
// preemption signals), failing container starts inside episodes.
func TestFIFOOpenRestarted(t *testing.T) {
	need(t, asRoot)
	needPatch(t, "0017-fifo-open-restart")
	prog := guestProgram(t, "fifoopen")
	if out, err := exec.Command(prog).CombinedOutput(); strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("on the host: %v: %s", err, out) // the reference
	}
	bin := guestProgramBytes(t, "fifoopen")
	isolations(t, asRoot, func(t *testing.T, iso string) {
		tmp := privateTmp(t, asRoot)
		r := runRungv(t, asRoot, tmp, string(bin), "run", "--rm", "--network", "none", "--isolation", iso, imageRef,
			"sh", "-c", "cat > /tmp/fifoopen && chmod +x /tmp/fifoopen && /tmp/fifoopen")
		if r.code != 0 || strings.TrimSpace(r.stdout) != "ok" {
			t.Fatalf("fifoopen in the episode: exit %d: %s%s", r.code, r.stdout, r.stderr)
		}
	})
}
