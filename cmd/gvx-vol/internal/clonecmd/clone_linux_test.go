package clonecmd

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"z.gfire.dev/gvx/reflink/reflinktest"
)

func TestCloneOnXFS(t *testing.T) {
	mnt := reflinktest.Mount(t, "xfs")
	golden := filepath.Join(mnt, "golden-docker.ext4")
	want := writeGolden(t, golden)
	out, err := runCLI(t, "clone", "--count", "4", "--no-sync", "--json", golden, filepath.Join(mnt, "ep-%04d.ext4"))
	if err != nil {
		t.Fatal(err)
	}
	var res Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Mode != "always" || len(res.Clones) != 4 {
		t.Fatalf("%+v", res)
	}
	for _, c := range res.Clones {
		if c.Method.String() != "clone" || c.Copied != 0 {
			t.Errorf("%s: %+v, want a clone", c.Dst, c)
		}
		mustEqualFile(t, c.Dst, want)
	}
	if out, err := runCLI(t, "clone", "--probe", mnt); err != nil || !strings.Contains(out, "can clone") {
		t.Errorf("--probe %s: %q, %v", mnt, out, err)
	}
}

func TestCloneOnTmpfs(t *testing.T) {
	mnt := reflinktest.Mount(t, "tmpfs")
	golden := filepath.Join(mnt, "golden-docker.ext4")
	want := writeGolden(t, golden)
	ep := filepath.Join(mnt, "ep.ext4")
	_, err := runCLI(t, "clone", golden, ep)
	if err == nil || !strings.Contains(err.Error(), "tmpfs") || !strings.Contains(err.Error(), "--reflink=auto") {
		t.Fatalf("default clone on tmpfs: %v; want an error naming tmpfs and --reflink=auto", err)
	}
	out, err := runCLI(t, "clone", "--reflink=auto", golden, ep)
	if err != nil || !strings.Contains(out, "sparse copy") || !strings.Contains(out, "could not clone: the tmpfs filesystem") {
		t.Fatalf("--reflink=auto on tmpfs: %q, %v", out, err)
	}
	mustEqualFile(t, ep, want)
	if out, err := runCLI(t, "clone", "--probe", mnt); err == nil || !strings.Contains(out, "cannot clone") {
		t.Errorf("--probe %s: %q, %v; want failure", mnt, out, err)
	}
}
