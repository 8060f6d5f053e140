package imagecmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/image"
	"z.gfire.dev/gvx/image/imagetest"
)

func runApp(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := &cli.App{Name: "gvx-vol", Commands: []*cli.Command{Command()}, Writer: &out, ErrWriter: &errOut}
	err := app.Run(append([]string{"gvx-vol"}, args...))
	return out.String(), errOut.String(), err
}

func busyboxLayout(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := imagetest.BuildBusyboxLayout(dir); errors.Is(err, imagetest.ErrNoBusybox) {
		t.Skip("no /bin/busybox (Debian package busybox-static)")
	} else if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestAddLsRmGC(t *testing.T) {
	lay := busyboxLayout(t)
	cacheDir := t.TempDir()
	out, _, err := runApp(t, "image", "add", "--cache", cacheDir, "--json", "oci:"+lay)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Digest, EROFS, Config, Profile string
		Created                        bool
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("add --json printed %q: %v", out, err)
	}
	if !strings.HasPrefix(res.Digest, "sha256:") || res.Profile != "runtime" || !res.Created ||
		!strings.HasPrefix(res.EROFS, cacheDir) || !strings.HasPrefix(res.Config, cacheDir) {
		t.Errorf("add: %+v", res)
	}
	if _, err := os.Stat(res.EROFS); err != nil {
		t.Error(err)
	}
	if cfg, err := image.ReadConfig(res.Config); err != nil || len(cfg.Cmd) == 0 {
		t.Errorf("config: %+v %v", cfg, err)
	}
	// Same image again through $GVX_CACHE and the full profile, human output.
	t.Setenv("GVX_CACHE", cacheDir)
	out, _, err = runApp(t, "image", "add", "--profile", "full", "oci:"+lay+":"+imagetest.BusyboxRef)
	if err != nil || !strings.Contains(out, "added ") || !strings.Contains(out, "erofs:") {
		t.Errorf("add --profile full: %q %v", out, err)
	}
	out, _, err = runApp(t, "image", "ls")
	if err != nil || strings.Count(out, "\n") != 3 || !strings.Contains(out, "oci:"+lay) {
		t.Errorf("ls:\n%s%v", out, err)
	}
	out, _, err = runApp(t, "image", "ls", "--json")
	var list []map[string]any
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list) != 2 {
		t.Errorf("ls --json: %q %v", out, err)
	}
	out, _, err = runApp(t, "image", "rm", "--profile", "full", "oci:"+lay+":"+imagetest.BusyboxRef)
	if err != nil || !strings.Contains(out, "removed") {
		t.Errorf("rm: %q %v", out, err)
	}
	out, _, err = runApp(t, "image", "gc", "--json")
	var gc struct{ Removed []string }
	if err != nil || json.Unmarshal([]byte(out), &gc) != nil || len(gc.Removed) != 2 {
		t.Errorf("gc --json: %q %v (want the full profile's erofs and report)", out, err)
	}
	if _, err := os.Stat(res.EROFS); err != nil {
		t.Errorf("gc removed the referenced runtime image: %v", err)
	}
	out, _, err = runApp(t, "image", "gc")
	if err != nil || !strings.HasPrefix(out, "removed 0 files") {
		t.Errorf("second gc: %q %v", out, err)
	}
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"image", "add", "--cache", dir}, 2, "need exactly one SOURCE"},
		{[]string{"image", "add", "--cache", dir, "oci:"}, 2, "invalid source"},
		{[]string{"image", "add", "--cache", dir, "--profile", "tiny", "oci:" + dir}, 2, "unknown profile"},
		{[]string{"image", "add", "--cache", dir, "oci:" + filepath.Join(dir, "none")}, 1, "not found"},
		{[]string{"image", "rm", "--cache", dir, "busybox"}, 1, "no image"},
		{[]string{"image", "rm", "--cache", dir}, 2, "need at least one REF"},
	} {
		_, _, err := runApp(t, tc.args...)
		if err == nil || cliutil.ExitCode(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%v: %v (code %d), want code %d and %q", tc.args, err, cliutil.ExitCode(err), tc.code, tc.msg)
		}
	}
}
