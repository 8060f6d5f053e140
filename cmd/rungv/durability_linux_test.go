package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/runtime/volume"
)

// TestVolumeEpisodeDurabilityKill: with durability=episode a guest fsync
// skips the host flush but still commits ext4lite's journal into the
// volume file. The operator SIGKILLs the episode while the guest writes
// and fsyncs file after file: the volume replays to a state that
// ext4lite's Check and e2fsck -fn pass, and every file the guest saw
// fsynced before the kill is there with its bytes.
func TestVolumeEpisodeDurabilityKill(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		needNamespaces(t, u)
		tmp := privateTmp(t, u)
		vol := newVolume(t, u, 256<<20)
		c := command(t, u, tmp, "run", "--network", "none", "--mount", "type=volume,src="+vol+",dst=/d,durability=episode", imageRef, "sh", "-c",
			`i=0; while :; do i=$((i+1)); printf 'file %d\n' $i > /tmp/x; dd if=/tmp/x of=/d/f$i conv=fsync 2>/dev/null || exit 1; echo $i; done`)
		line, stderr := startLines(t, c)
		last := 0
		for last < 40 {
			s := line()
			n, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("guest said %q (stderr %q)", s, stderr.String())
			}
			last = n
		}
		_ = c.Process.Signal(syscall.SIGKILL)
		_ = c.Wait()
		checkClean(t, tmp)
		v, err := ext4lite.Open(vol, nil) // replays the journal the kill left
		if err != nil {
			t.Fatalf("open after the kill: %v", err)
		}
		for i := 1; i <= last; i++ {
			f, err := v.Open(fmt.Sprintf("f%d", i))
			if err != nil {
				t.Fatalf("f%d was fsynced before the kill (the guest went on to %d): %v", i, last, err)
			}
			b, _ := io.ReadAll(f)
			f.Close()
			if string(b) != fmt.Sprintf("file %d\n", i) {
				t.Fatalf("f%d = %q after the kill", i, b)
			}
		}
		if r, err := v.Check(nil); err != nil || !r.Clean() {
			t.Fatalf("Check after the kill: %v %v", r, err)
		}
		if err := v.Close(); err != nil {
			t.Fatal(err)
		}
		e2fsck(t, vol)
		t.Logf("killed after %d fsynced files; all there", last)
	})
}

// TestVolumeEpisodeDurabilityRefused: durability=episode on a read-only
// volume, or on a bind or tmpfs mount, is a clear error before any start.
func TestVolumeEpisodeDurabilityRefused(t *testing.T) {
	u := asRoot
	need(t, u)
	tmp := privateTmp(t, u)
	vol := newVolume(t, u, 64<<20)
	for _, m := range []string{
		"type=volume,src=" + vol + ",dst=/d,ro,durability=episode",
		"type=tmpfs,dst=/d,durability=episode",
		"type=volume,src=" + vol + ",dst=/d,durability=later",
	} {
		r := runRungv(t, u, tmp, "", "run", "--network", "none", "--mount", m, imageRef, "echo", "ran")
		if r.code == 0 || strings.Contains(r.stdout, "ran") || !strings.Contains(r.stderr, "durability") {
			t.Errorf("--mount %s: exit %d stdout %q stderr %q; want a refusal naming durability", m, r.code, r.stdout, r.stderr)
		}
	}
}

// TestVolumeStatsFile: with --profile-dir the volume's request counters
// land in DIR/<id>.volume-0.json at its release in the seccomp-only mode
// (rungv serves the volume); in the namespaced mode the gofer, which sees
// no host path once set up, logs them to its runsc log (--debug-log).
func TestVolumeStatsFile(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		isolations(t, u, func(t *testing.T, iso string) {
			tmp := privateTmp(t, u)
			dir := privateTmp(t, u)
			logs := privateTmp(t, u)
			vol := newVolume(t, u, 64<<20)
			r := runRungv(t, u, tmp, "", "run", "--isolation", iso, "--network", "none", "--profile-dir", dir, "--debug-log", logs+"/",
				"--mount", "type=volume,src="+vol+",dst=/d", imageRef, "sh", "-c",
				`for i in 1 2 3 4 5; do echo $i > /tmp/x; dd if=/tmp/x of=/d/f$i conv=fsync 2>/dev/null; done; echo done`)
			if r.code != 0 || r.stdout != "done\n" {
				t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
			}
			var b []byte
			if iso == "seccomp-only" {
				got, _ := filepath.Glob(filepath.Join(dir, "*.volume-0.json"))
				if len(got) != 1 {
					ents, _ := os.ReadDir(dir)
					t.Fatalf("want one *.volume-0.json in %s, got %v (dir holds %v)", dir, got, ents)
				}
				var err error
				if b, err = os.ReadFile(got[0]); err != nil {
					t.Fatal(err)
				}
			} else {
				got, _ := filepath.Glob(filepath.Join(logs, "*gofer*"))
				for _, g := range got {
					lb, _ := os.ReadFile(g)
					if _, after, ok := strings.Cut(string(lb), "gvx-ext4lite: volume stats "); ok {
						b = []byte(strings.SplitN(after, "\n", 2)[0])
					}
				}
				if b == nil {
					t.Fatalf("no volume stats line in the gofer logs %v", got)
				}
			}
			var st volume.Stats
			if err := json.Unmarshal(b, &st); err != nil {
				t.Fatalf("%v: %q", err, b)
			}
			if !st.Final || st.Target != "/d" || st.Requests["FSync"] < 5 || st.Syncs < 5 || st.Requests["OpenCreateAt"] < 5 || st.Total == 0 {
				t.Fatalf("stats %s", b)
			}
			t.Logf("%s", b)
			checkClean(t, tmp)
		})
	})
}
