package checkpoint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadInfoHostile: a gvx-checkpoint.json that rungv did not
// write is refused with the directory and what is wrong in it, before
// anything of it reaches the sandbox's command line; a huge one is not
// read whole.
func TestReadInfoHostile(t *testing.T) {
	for _, c := range []struct{ name, js, want string }{
		{"flag", `{"container_id":"--debug-log=/tmp/x","network":"none"}`, `container_id "--debug-log=/tmp/x" is not one rungv makes`},
		{"path", `{"container_id":"../../etc","network":"none"}`, "container_id"},
		{"slash", `{"container_id":"a/b","network":"none"}`, "container_id"},
		{"dot", `{"container_id":"..","network":"none"}`, "container_id"},
		{"long", `{"container_id":"` + strings.Repeat("a", 129) + `","network":"none"}`, "container_id"},
		{"nul", `{"container_id":"a\u0000b","network":"none"}`, "container_id"},
		{"fd-low", `{"container_id":"gvx-1","pass_fds":[2]}`, "descriptor 2 is out of range"},
		{"fd-huge", `{"container_id":"gvx-1","pass_fds":[99999999]}`, "out of range"},
		{"volume-relative", `{"container_id":"gvx-1","volumes":["data"]}`, `volumes: "data" is not an absolute guest path`},
		{"no-id", `{"network":"none"}`, "malformed"},
		{"junk", `{"container_id":`, "malformed"},
		{"ok", `{"container_id":"gvx-0123abcd","volumes":["/data"],"network":"none","pass_fds":[3,4]}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, InfoFile), []byte(c.js), 0o600); err != nil {
				t.Fatal(err)
			}
			ci, err := ReadInfo(dir)
			switch {
			case c.want == "" && err != nil:
				t.Fatal(err)
			case c.want == "":
				if ci.ContainerID != "gvx-0123abcd" || len(ci.PassFDs) != 2 {
					t.Fatalf("read %+v", ci)
				}
			case err == nil:
				t.Fatalf("accepted %+v", ci)
			case !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir):
				t.Fatalf("error %q does not name %s and %q", err, dir, c.want)
			}
		})
	}
	t.Run("huge", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, InfoFile)
		if err := os.WriteFile(path, []byte(`{"container_id":"gvx-1"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, 1<<30); err != nil { // sparse: a valid prefix, then 1 GiB of NULs
			t.Fatal(err)
		}
		_, err := ReadInfo(dir)
		if err == nil || !strings.Contains(err.Error(), "larger than 1048576 bytes") {
			t.Fatalf("a 1 GiB %s: %v", InfoFile, err)
		}
	})
}

// TestCheckpointDirTrust: a checkpoint directory someone else could write
// is refused for a checkpoint and for a restore, naming why: a symlink, a
// directory writable by group or others, one another user owns (as root);
// the caller's own 0700 or 0755 directory is taken.
func TestCheckpointDirTrust(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, mode os.FileMode) string {
		d := filepath.Join(base, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, d := range []string{mk("own", 0o700), mk("readable", 0o755)} {
		if err := checkDir(d); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(mk("target", 0o700), link); err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{
		mk("world", 0o777):        "writable by others",
		mk("group", 0o770):        "writable by others",
		link:                      "not a directory",
		filepath.Join(base, "no"): "no such file",
	}
	if os.Getuid() == 0 {
		other := mk("other", 0o700)
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		bad[other] = "owned by uid 65534"
	}
	for d, want := range bad {
		err := checkDir(d)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", d, err, want)
		}
		if _, _, _, err := Open(d); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%s): %v, want %q", d, err, want)
		}
		if !strings.HasSuffix(d, "/no") { // (MkdirAll makes that one)
			if _, err := Create(d, []byte("{}"), Info{ContainerID: "x"}); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Create(%s): %v, want %q", d, err, want)
			}
		}
	}
}
