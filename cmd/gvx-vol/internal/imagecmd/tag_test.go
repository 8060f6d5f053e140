package imagecmd

import (
	"encoding/json"
	"strings"
	"testing"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
)

// TestTagAndNames: image add --tag and image tag record names that image
// ls shows as Docker prints them, with their source; bad names are usage
// errors, an unknown image is not.
func TestTagAndNames(t *testing.T) {
	lay := busyboxLayout(t)
	cacheDir := t.TempDir()
	out, _, err := runApp(t, "image", "add", "--cache", cacheDir, "--tag", "docker:dind", "--json", "oci:"+lay)
	if err != nil {
		t.Fatal(err)
	}
	var res struct{ Digest string }
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	out, _, err = runApp(t, "image", "tag", "--cache", cacheDir, res.Digest, "registry.example:5000/team/dind:v2")
	if err != nil || !strings.Contains(out, "tagged oci:"+lay+" (runtime profile) as registry.example:5000/team/dind:v2") {
		t.Errorf("tag by digest: %q %v", out, err)
	}
	out, _, err = runApp(t, "image", "ls", "--cache", cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[1], "docker:dind ") || !strings.HasSuffix(lines[1], " oci:"+lay) ||
		!strings.HasPrefix(lines[3], "registry.example:5000/team/dind:v2 ") {
		t.Errorf("ls:\n%s", out)
	}
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"image", "tag", "--cache", cacheDir, "docker:dind"}, 2, "need SOURCE-OR-DIGEST and NAME[:TAG]"},
		{[]string{"image", "tag", "--cache", cacheDir, "docker:dind", "oci:/x"}, 2, "NAME[:TAG]"},
		{[]string{"image", "add", "--cache", cacheDir, "--tag", "a@sha256:" + strings.Repeat("0", 64), "oci:" + lay}, 2, "a digest cannot be a name"},
		{[]string{"image", "tag", "--cache", cacheDir, "docker:rootless", "x:y"}, 1, "gvx-vol image add --tag x:y SOURCE"},
	} {
		_, _, err := runApp(t, tc.args...)
		if err == nil || cliutil.ExitCode(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%v: %v (code %d), want code %d and %q", tc.args, err, cliutil.ExitCode(err), tc.code, tc.msg)
		}
	}
	if _, _, err := runApp(t, "image", "rm", "--cache", cacheDir, "docker.io/library/docker:dind"); err != nil {
		t.Errorf("rm of a name in its long form: %v", err)
	}
}
