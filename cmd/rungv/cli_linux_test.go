package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"z.gfire.dev/gvx/ext4lite"
)

// TestJSONEventsAndNewVolume: --json reports start, the volume rungv
// created for a missing file, and the guest's exit code; a bad image is
// an error event with status 125; --log-level rejects unknown levels.
func TestJSONEventsAndNewVolume(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		vol := filepath.Join(privateTmp(t, u), "new.ext4")
		r := runRungv(t, u, tmp, "", "run", "--json", "--network", "none",
			"--mount", "type=volume,src="+vol+",dst=/data,size=128m", imageRef, "sh", "-c", "echo hi >/data/f; exit 4")
		if r.code != 4 {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		var evs []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
			var e map[string]any
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatalf("stderr line %q is not JSON: %v", l, err)
			}
			evs = append(evs, e)
		}
		if len(evs) != 3 || evs[0]["event"] != "volume-created" || evs[0]["path"] != vol || evs[0]["bytes"] != float64(128<<20) ||
			evs[1]["event"] != "start" || evs[2]["event"] != "exit" || evs[2]["exit_code"] != float64(4) {
			t.Fatalf("events %v", evs)
		}
		checkClean(t, tmp)
		e2fsck(t, vol)
		v, err := ext4lite.Open(vol, &ext4lite.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if h, err := v.Lstat("f"); err != nil || h.Size != 3 {
			t.Errorf("f in the new volume: %+v, %v", h, err)
		}
		v.Close()

		r = runRungv(t, u, tmp, "", "run", "--json", "oci:"+filepath.Join(tmp, "missing"), "true")
		if r.code != 125 || !strings.Contains(r.stderr, `"event":"error"`) {
			t.Fatalf("bad image: exit %d stderr %q", r.code, r.stderr)
		}
		r = runRungv(t, u, tmp, "", "run", "--log-level", "loud", imageRef, "true")
		if r.code != 125 || !strings.Contains(r.stderr, "--log-level") {
			t.Fatalf("bad level: exit %d stderr %q", r.code, r.stderr)
		}
		checkClean(t, tmp)
	})
}
