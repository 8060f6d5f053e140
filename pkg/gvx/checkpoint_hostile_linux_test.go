package gvx_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/pkg/gvx"
	"z.gfire.dev/gvx/spec"
)

// TestRestoreHostileCheckpoint restores checkpoint directories that were
// tampered with after the save (a user who may write them, or a disk that
// lost part of them): every one must end with an error that names the
// checkpoint, within a bound, and never run a guest as if nothing were
// wrong, hang, or take the host's memory.
func TestRestoreHostileCheckpoint(t *testing.T) {
	need(t)
	poolEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cp, _ := checkpointSpec(t, ctx, counterSpec(), dir, `(?m)^c3$`)

	info := func(id, passFDs string) func(t *testing.T, d string) {
		return func(t *testing.T, d string) {
			writeFile(t, filepath.Join(d, "gvx-checkpoint.json"), `{"container_id":"`+id+`","volumes":[],"network":"none","pass_fds":`+passFDs+`}`)
		}
	}
	for _, c := range []struct {
		name   string
		tamper func(t *testing.T, dir string)
		want   string // in the error, besides the directory
	}{
		{"state-truncated", func(t *testing.T, d string) { truncateHalf(t, filepath.Join(d, "checkpoint.img")) }, "restore"},
		{"state-garbled", func(t *testing.T, d string) { garble(t, filepath.Join(d, "checkpoint.img"), 0.5) }, "restore"},
		{"state-header", func(t *testing.T, d string) { garble(t, filepath.Join(d, "checkpoint.img"), 0) }, "restore"},
		{"state-empty", func(t *testing.T, d string) { writeFile(t, filepath.Join(d, "checkpoint.img"), "") }, "never checkpointed"},
		{"pages-meta-truncated", func(t *testing.T, d string) { truncateHalf(t, filepath.Join(d, "pages_meta.img")) }, "metadata"},
		{"pages-truncated", func(t *testing.T, d string) { truncateHalf(t, filepath.Join(d, "pages.img")) }, "restore"},
		{"pages-missing", func(t *testing.T, d string) { removeFile(t, filepath.Join(d, "pages.img")) }, "pages.img"},
		{"config-junk", func(t *testing.T, d string) { writeFile(t, filepath.Join(d, "config.json"), "{not json") }, "config.json is no OCI spec"},
		{"config-null", func(t *testing.T, d string) { writeFile(t, filepath.Join(d, "config.json"), "null") }, "config.json is no OCI spec"},
		{"info-junk", func(t *testing.T, d string) { writeFile(t, filepath.Join(d, "gvx-checkpoint.json"), "[") }, "malformed"},
		// The container ID is runsc boot's last argument: one that reads
		// as a flag was parsed as one, and one with a path ran.
		{"info-id-flag", info("--debug-log=/tmp/x", "[]"), "container_id"},
		{"info-id-path", info("../../x", "[]"), "container_id"},
		{"info-passfds-extra", info("gvx-0123", "[3]"), "publishes 1 ports, this restore 0"},
		{"info-passfds-range", info("gvx-0123", "[-1]"), "pass_fds"},
		// Another user's files, or links to them (cp -a of their
		// checkpoint, a link put in a directory they could write): the
		// restore would load their saved kernel or spec.
		{"state-symlink", func(t *testing.T, d string) { linkAway(t, filepath.Join(d, "checkpoint.img")) }, "is a symlink"},
		{"spec-symlink", func(t *testing.T, d string) { linkAway(t, filepath.Join(d, gvx.SpecFile)) }, "is a symlink"},
		{"info-writable", func(t *testing.T, d string) { chmod(t, filepath.Join(d, "gvx-checkpoint.json"), 0o666) }, "mode 0666"},
		{"dir-writable", func(t *testing.T, d string) { chmod(t, d, 0o777) }, "mode 0777"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := filepath.Join(t.TempDir(), "ck")
			copyDir(t, cp.Dir, d)
			c.tamper(t, d)
			out := newOutput()
			cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
			defer ccancel()
			t0 := time.Now()
			code, err := restoreRun(cctx, d, out)
			t.Logf("%v: code %d err %v output %q", time.Since(t0), code, err, tailOf(out.String(), 300))
			switch {
			case cctx.Err() != nil:
				t.Fatalf("the restore of a tampered checkpoint ran on or hung (60 s)")
			case err == nil:
				t.Fatalf("the restore of a tampered checkpoint exited %d with no error", code)
			case !strings.Contains(err.Error(), d) || !strings.Contains(err.Error(), c.want):
				t.Errorf("error %q does not name the checkpoint and %q", err, c.want)
			}
		})
	}
}

func restoreRun(ctx context.Context, dir string, out io.Writer) (int, error) {
	cp, err := gvx.OpenCheckpoint(dir)
	if err != nil {
		return -1, err
	}
	sb, err := cp.Restore(ctx, nil, gvx.Config{Rungv: rungvBin, Stdout: out, Stderr: out})
	if err != nil {
		return -1, err
	}
	defer sb.Close()
	return sb.Run(ctx)
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// copyDir copies the checkpoint directory src to dst (sparse, cloned
// where the filesystem can).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", "--reflink=auto", "--sparse=always", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -a %s %s: %v: %s", src, dst, err, out)
	}
}

func truncateHalf(t *testing.T, path string) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, st.Size()/2); err != nil {
		t.Fatal(err)
	}
}

// garble overwrites 4 KiB at the fraction at of path's size with 0xa5.
func garble(t *testing.T, path string, at float64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xa5}, 4096), int64(float64(st.Size())*at)); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// linkAway moves path's file beside the checkpoint and leaves a symlink
// to it in its place.
func linkAway(t *testing.T, path string) {
	t.Helper()
	away := filepath.Join(filepath.Dir(filepath.Dir(path)), filepath.Base(path)+".away")
	if err := os.Rename(path, away); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(away, path); err != nil {
		t.Fatal(err)
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func removeFile(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreOwnCompanions: a restore clones the checkpoint's own
// companion volumes, in its directory, whatever gvx-spec.json names: a
// spec that names another file (another episode's clone, say) is refused,
// where the restored guest used to be handed a copy of it; and a
// checkpoint directory copied elsewhere restores from its own companions,
// where it used to clone the original's (or fail once that was gone).
func TestRestoreOwnCompanions(t *testing.T) {
	need(t)
	poolEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir, _ := poolDirs(t)
	vol := filepath.Join(dir, "boot.ext4")
	makeGolden(t, vol)
	s := &spec.Spec{
		Version: spec.Version, Image: imageRef, Network: spec.NetworkNone, Isolation: spec.IsolationSeccompOnly,
		Entrypoint: []string{"sh", "-c"},
		Args:       []string{`(i=0; while :; do i=$((i+1)); echo "c$i $(cat /data/golden.txt)"; sleep 0.05; done) & exec sleep 100000`},
		Mounts:     []spec.Mount{{Type: spec.MountVolume, Source: vol, Target: "/data"}},
	}
	cp, _ := checkpointSpec(t, ctx, s, dir, `(?m)^c3 `)

	// Another episode's volume, which this checkpoint's restore must never see.
	secret := filepath.Join(dir, "other-episode.ext4")
	makeVolume(t, secret, "golden.txt", "another episode's file\n")

	restored := func(t *testing.T, ckdir string) (string, error) {
		t.Helper()
		c, err := gvx.OpenCheckpoint(ckdir)
		if err != nil {
			return "", err
		}
		out := newOutput()
		sb, err := c.Restore(ctx, []string{filepath.Join(t.TempDir(), "v.ext4")}, gvx.Config{Rungv: rungvBin, Stdout: out, Stderr: out})
		if err != nil {
			return "", err
		}
		defer sb.Close()
		go sb.Run(ctx)
		m := out.waitFor(t, `(?m)^c\d+ (.*)$`)
		return m[1], nil
	}

	t.Run("foreign", func(t *testing.T) {
		d := filepath.Join(t.TempDir(), "ck")
		copyDir(t, cp.Dir, d)
		var js map[string]any
		b, err := os.ReadFile(filepath.Join(d, gvx.SpecFile))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &js); err != nil {
			t.Fatal(err)
		}
		js["mounts"].([]any)[0].(map[string]any)["source"] = secret
		b, _ = json.Marshal(js)
		writeFile(t, filepath.Join(d, gvx.SpecFile), string(b))
		got, err := restored(t, d)
		if err == nil {
			t.Fatalf("a checkpoint whose spec names %s as its volume restored; the guest reads %q", secret, got)
		}
		if !strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), d) {
			t.Errorf("the refusal names neither the file nor the checkpoint: %v", err)
		}
	})
	t.Run("companion-symlink", func(t *testing.T) {
		d := filepath.Join(t.TempDir(), "ck")
		copyDir(t, cp.Dir, d)
		comp := filepath.Join(d, "volume-0.ext4")
		removeFile(t, comp)
		if err := os.Symlink(secret, comp); err != nil {
			t.Fatal(err)
		}
		got, err := restored(t, d)
		if err == nil {
			t.Fatalf("a checkpoint whose companion is a symlink to %s restored; the guest reads %q", secret, got)
		}
		if !strings.Contains(err.Error(), "is a symlink") || !strings.Contains(err.Error(), comp) {
			t.Errorf("the refusal does not name the symlinked companion: %v", err)
		}
	})
	t.Run("moved", func(t *testing.T) {
		d := filepath.Join(t.TempDir(), "ck")
		copyDir(t, cp.Dir, d)
		gone := cp.Dir + ".gone"
		if err := os.Rename(cp.Dir, gone); err != nil {
			t.Fatal(err)
		}
		defer os.Rename(gone, cp.Dir)
		got, err := restored(t, d)
		if err != nil {
			t.Fatalf("a checkpoint directory copied elsewhere (the original gone): %v", err)
		}
		if got != "from the golden volume" {
			t.Errorf("the restored guest reads %q from its volume", got)
		}
	})
}
