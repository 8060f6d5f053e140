package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"z.gfire.dev/gvx/runtime/volume"
)

// TestVolumeDentryCache: the Sentry keeps what it walked on a volume
// (runtime.volumeDentryCache): a guest that creates 3,000 files and then
// lists them with their attributes three times (ls -l: a stat each, as
// Python's import and make do) walks each file once, when it is created,
// not once per listing; with gVisor's default of 1,000 cached dentries
// every listing walked all 3,000 again. Counted by the volume server's
// request counters (--profile-dir), not timed.
//
// And the cache fits the mount's max-open: on a volume with max-open=400
// a guest that reads 800 files one after the other, twice, gets every
// one (with gVisor's 1,000 cached dentries, two server FDs each, the
// opens failed with ENFILE).
func TestVolumeDentryCache(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		t.Run("walks", func(t *testing.T) {
			tmp := privateTmp(t, u)
			dir := privateTmp(t, u)
			vol := newVolume(t, u, 64<<20)
			r := runRungv(t, u, tmp, "", "run", "--isolation", "seccomp-only", "--network", "none", "--profile-dir", dir,
				"--mount", "type=volume,src="+vol+",dst=/d", imageRef, "sh", "-c",
				`mkdir /d/many && cd /d/many && i=0; while [ $i -lt 3000 ]; do echo $i > f$i; i=$((i+1)); done
for r in 1 2 3; do ls -l /d/many | grep -c ' f'; done`)
			if r.code != 0 || r.stdout != "3000\n3000\n3000\n" {
				t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
			}
			got, _ := filepath.Glob(filepath.Join(dir, "*.volume-0.json"))
			if len(got) != 1 {
				t.Fatalf("want one *.volume-0.json in %s, got %v", dir, got)
			}
			b, err := os.ReadFile(got[0])
			if err != nil {
				t.Fatal(err)
			}
			var st volume.Stats
			if err := json.Unmarshal(b, &st); err != nil {
				t.Fatalf("%v: %q", err, b)
			}
			// One Walk per new name (the lookup before the create) and a
			// few for the directories; three uncached listings add 9,000.
			if !st.Final || st.Requests["Walk"] > 4000 {
				t.Fatalf("%d Walks for 3,000 files created and listed three times, want at most 4,000: %s", st.Requests["Walk"], b)
			}
			t.Logf("%d Walks, %d requests", st.Requests["Walk"], st.Total)
			e2fsck(t, vol)
			checkClean(t, tmp)
		})
		t.Run("max-open", func(t *testing.T) {
			tmp := privateTmp(t, u)
			vol := newVolume(t, u, 64<<20)
			r := runRungv(t, u, tmp, "", "run", "--network", "none", "--mount", "type=volume,src="+vol+",dst=/d,max-open=400", imageRef, "sh", "-c",
				`mkdir /d/many && cd /d/many && i=0; while [ $i -lt 800 ]; do echo $i > f$i; i=$((i+1)); done
for r in 1 2; do cat f* | wc -l; done`)
			if r.code != 0 || r.stdout != "800\n800\n" || strings.Contains(r.stderr, "open files") {
				t.Fatalf("exit %d stdout %q stderr %q: want every file read twice within max-open=400", r.code, r.stdout, r.stderr)
			}
			e2fsck(t, vol)
			checkClean(t, tmp)
		})
	})
}

// TestVolumeChildrenSet (gVisor patch 0014-gofer-children-set): in a
// directory the guest made on a volume, the Sentry knows every name and
// answers a lookup of a missing one without asking the volume server: 500
// files created there by the shell (a lookup, then a create, each) cost
// no Walk (unpatched: 500). And what it knows follows every change the
// guest makes: names created, hard-linked, unlinked, renamed within and
// across directories and renamed over one another are seen exactly as
// they are, in this episode and in the next one (read from the volume),
// and a name removed can be made again (no stale EEXIST).
func TestVolumeChildrenSet(t *testing.T) {
	needPatch(t, "0014-gofer-children-set")
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		dir := privateTmp(t, u)
		vol := newVolume(t, u, 64<<20)
		check := `cd /d/n && for f in a b c d e x y/a y/d z; do [ -e $f ] && printf '%s ' $f; done; cat d e x y/d y/a | tr '\n' ' '; ls -a . | tr '\n' ' '; ls -a y | tr '\n' ' '; echo`
		want := "b d e x y/a y/d z d2 e2 x1 d1 a . .. b d e x y z . .. a d \n"
		r := runRungv(t, u, tmp, "", "run", "--isolation", "seccomp-only", "--network", "none", "--profile-dir", dir,
			"--mount", "type=volume,src="+vol+",dst=/d", imageRef, "sh", "-c",
			`mkdir /d/w && cd /d/w && i=0; while [ $i -lt 500 ]; do echo $i > f$i; i=$((i+1)); done
mkdir /d/n && cd /d/n && mkdir y && echo a > a && echo b > b && ln a c && echo d1 > y/d && mv a y/a && rm c &&
echo x1 > x && echo d2 > d && echo e1 > e && echo e2 > e.new && mv e.new e && : > z && ln -s y/d d.link && rm d.link &&
touch c2 && mv c2 c && rm c && [ ! -e c ] && [ ! -e e.new ] && `+check)
		if r.code != 0 || r.stdout != want {
			t.Fatalf("exit %d stdout %q, want %q; stderr %q", r.code, r.stdout, want, r.stderr)
		}
		got, _ := filepath.Glob(filepath.Join(dir, "*.volume-0.json"))
		if len(got) != 1 {
			t.Fatalf("want one *.volume-0.json in %s, got %v", dir, got)
		}
		b, err := os.ReadFile(got[0])
		if err != nil {
			t.Fatal(err)
		}
		var st volume.Stats
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatalf("%v: %q", err, b)
		}
		// The second part walks a few names it did not make itself (cat,
		// ls, [ -e ] of names that exist are answered from dentries too).
		if st.Requests["Walk"] > 50 {
			t.Fatalf("%d Walks for 500 files created in a new directory and a few more, want at most 50: %s", st.Requests["Walk"], b)
		}
		t.Logf("%d Walks, %d requests", st.Requests["Walk"], st.Total)
		// The next episode reads the directory from the volume, with no
		// set of names: the same.
		r = runRungv(t, u, tmp, "", "run", "--network", "none", "--mount", "type=volume,src="+vol+",dst=/d", imageRef, "sh", "-c", check)
		if r.code != 0 || r.stdout != want {
			t.Fatalf("next episode: exit %d stdout %q, want %q; stderr %q", r.code, r.stdout, want, r.stderr)
		}
		e2fsck(t, vol)
		checkClean(t, tmp)
	})
}
