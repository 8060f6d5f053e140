package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/spec"
)

// TestRunSpecFile: rungv run --spec FILE runs the busybox episode the file
// describes (command, env over the image's, workdir, a tmpfs and a
// new volume at a path holding "," and "=", of the size the spec gives);
// --spec-fd N reads the same spec from a pipe; episode flags or IMAGE beside
// --spec, and a spec with an unknown field, are usage errors (exit 2).
func TestRunSpecFile(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp, files := privateTmp(t, u), privateTmp(t, u)
		vol := filepath.Join(files, "ep,1=x.ext4")
		s := spec.New(imageRef)
		s.Entrypoint = []string{"sh", "-c"}
		s.Args = []string{`echo $A $FROM_IMAGE $OVERRIDE; pwd; echo x > /scratch/f && cat /scratch/f; echo v > "/vol,k=v/f"`}
		s.Env = []string{"A=from-spec", "OVERRIDE=spec"}
		s.Workdir = "/etc"
		s.Network = spec.NetworkNone
		s.Mounts = []spec.Mount{
			{Type: spec.MountTmpfs, Target: "/scratch"},
			{Type: spec.MountVolume, Source: vol, Target: "/vol,k=v", Size: 64 << 20},
		}
		b, err := s.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(files, "ep.json")
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		want := "from-spec yes spec\n/etc\nx\n"
		r := runRungv(t, u, tmp, "", "run", "--log-level", "error", "--spec", file)
		if r.code != 0 || r.stdout != want {
			t.Fatalf("--spec: exit %d, stdout %q, stderr %q; want %q", r.code, r.stdout, r.stderr, want)
		}
		checkClean(t, tmp)
		if st, err := os.Stat(vol); err != nil || st.Size() != 64<<20 {
			t.Fatalf("the new volume: %v %v; want 64 MiB", st, err)
		}
		e2fsck(t, vol)
		v, err := ext4lite.Open(vol, &ext4lite.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if h, err := v.Lstat("f"); err != nil || h.Size != 2 {
			t.Errorf("f in the volume: %+v, %v", h, err)
		}
		v.Close()

		// The same spec over a pipe, as the SDK sends it (fd 3 here).
		c := command(t, u, tmp, "run", "--log-level", "error", "--spec-fd", "3")
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		c.ExtraFiles = []*os.File{pr}
		var so, se bytes.Buffer
		c.Stdout, c.Stderr = &so, &se
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		pr.Close()
		pw.Write(b)
		pw.Close()
		if err := c.Wait(); err != nil || so.String() != want {
			t.Fatalf("--spec-fd: %v, stdout %q, stderr %q", err, so.String(), se.String())
		}
		checkClean(t, tmp)

		bad := filepath.Join(files, "bad.json")
		if err := os.WriteFile(bad, []byte(`{"version":1,"image":"`+imageRef+`","networks":"none"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			args []string
			says string
		}{
			{[]string{"--spec", file, "-m", "1g"}, "--memory cannot be given with --spec"},
			{[]string{"--spec", file, imageRef, "true"}, "IMAGE and COMMAND cannot be given with --spec"},
			{[]string{"--spec", bad}, bad + `: invalid episode spec: unknown field "networks"`},
			{[]string{"--spec", file, "--spec-fd", "3"}, "give one"},
			{[]string{"--spec-fd", "0"}, "standard input"},
		} {
			r := runRungv(t, u, tmp, "", append([]string{"run"}, c.args...)...)
			if r.code != 2 || !strings.Contains(r.stderr, c.says) {
				t.Errorf("%q: exit %d, stderr %q; want 2 and %q", c.args, r.code, r.stderr, c.says)
			}
		}
		// With --json the refusal is an error event, and still exit 2.
		r = runRungv(t, u, tmp, "", "run", "--json", "--spec", bad)
		var ev map[string]any
		if err := json.Unmarshal([]byte(strings.TrimSpace(r.stderr)), &ev); r.code != 2 || err != nil || ev["event"] != "error" {
			t.Errorf("--json with a bad spec: exit %d, stderr %q", r.code, r.stderr)
		}
		checkClean(t, tmp)
	})
}
