package runtime

import (
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/spec"
)

// mapSource is a sink.Source of regular files (path → body), enough for
// buildOCISpec's reads (passwd, daemon.json, the shim's checks).
type mapSource map[string]string

func (m mapSource) Lstat(p string) (*sink.Header, error) {
	if b, ok := m[p]; ok {
		return &sink.Header{Path: p, Mode: sink.TypeReg | 0o755, Size: int64(len(b))}, nil
	}
	return nil, fs.ErrNotExist
}
func (m mapSource) ReadDir(string) ([]string, error) { return nil, fs.ErrNotExist }
func (m mapSource) Open(p string) (io.ReadCloser, error) {
	if b, ok := m[p]; ok {
		return io.NopCloser(strings.NewReader(b)), nil
	}
	return nil, fs.ErrNotExist
}

// TestDindTLSDefault: a privileged docker:dind-style episode whose
// environment (image's and episode's) and daemon.json set no TLS up gets
// --tls=false on its daemon's command line (dockerd otherwise sleeps 15 s
// before its plain-TCP listener serves); one where DOCKER_TLS_CERTDIR is
// non-empty (docker:dind's own default, /certs), a --tls… flag is given,
// or daemon.json speaks of tls does not; nor does an unprivileged one.
func TestDindTLSDefault(t *testing.T) {
	root := mapSource{"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n"}
	withJSON := mapSource{"etc/passwd": root["etc/passwd"], "etc/docker/daemon.json": `{"tls": true}`}
	for _, tc := range []struct {
		name     string
		imageEnv []string
		o        spec.Spec
		src      mapSource
		want     bool
	}{
		{"recipe: DOCKER_TLS_CERTDIR=", []string{"DOCKER_TLS_CERTDIR=/certs"}, spec.Spec{Privileged: true, Env: []string{"DOCKER_TLS_CERTDIR="}}, root, true},
		{"no TLS env at all", nil, spec.Spec{Privileged: true}, root, true},
		{"image's /certs", []string{"DOCKER_TLS_CERTDIR=/certs"}, spec.Spec{Privileged: true}, root, false},
		{"episode's /certs", nil, spec.Spec{Privileged: true, Env: []string{"DOCKER_TLS_CERTDIR=/certs"}}, root, false},
		{"DOCKER_TLS_VERIFY", nil, spec.Spec{Privileged: true, Env: []string{"DOCKER_TLS_VERIFY=1"}}, root, false},
		{"--tlsverify given", nil, spec.Spec{Privileged: true, Args: []string{"--tlsverify"}}, root, false},
		{"--tls=true given", nil, spec.Spec{Privileged: true, Args: []string{"--tls=true"}}, root, false},
		{"daemon.json tls", nil, spec.Spec{Privileged: true}, withJSON, false},
		{"unprivileged", nil, spec.Spec{Env: []string{"DOCKER_TLS_CERTDIR="}}, root, false},
		{"not the daemon", nil, spec.Spec{Privileged: true, Args: []string{"sh", "-c", "true"}}, root, false},
	} {
		img := &Image{Config: v1.Config{Entrypoint: []string{"dockerd-entrypoint.sh"}, Env: tc.imageEnv}}
		s, err := buildOCISpec(&tc.o, img, tc.src, "/root", "h")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := slices.Contains(s.Process.Args, "--tls=false")
		if got != tc.want {
			t.Errorf("%s: args %q: --tls=false %v, want %v", tc.name, s.Process.Args, got, tc.want)
		}
		if n := strings.Count(strings.Join(s.Process.Args, " "), "--tls"); n > 1 {
			t.Errorf("%s: args %q: more than one --tls flag", tc.name, s.Process.Args)
		}
	}
}

// TestDockerdShimTLS runs the shim rungv puts in front of the image's
// dockerd (for a daemon a script starts) with /bin/sh, a stand-in dockerd
// that prints its arguments: --tls=false is added when the daemon's own
// command line and environment set no TLS up, and not otherwise.
func TestDockerdShimTLS(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh:", err)
	}
	img := &Image{Config: v1.Config{Entrypoint: []string{"dockerd-entrypoint.sh"}}}
	src := mapSource{"usr/bin/dockerd": "x"}
	f := dockerdShim(&spec.Spec{Privileged: true, Entrypoint: []string{"sh"}, Args: []string{"-c", "dockerd-entrypoint.sh & sleep 1"}}, img, src)
	if f == nil {
		t.Fatal("no shim")
	}
	dir := t.TempDir()
	echo := filepath.Join(dir, "dockerd")
	if err := os.WriteFile(echo, []byte("#!/bin/sh\necho \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	shim := filepath.Join(dir, "shim")
	if err := os.WriteFile(shim, []byte(strings.ReplaceAll(f.body, "/usr/bin/dockerd", echo)), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env  []string
		args []string
		want bool
	}{
		{[]string{"DOCKER_TLS_CERTDIR="}, []string{"--host=tcp://0.0.0.0:2375"}, true},
		{nil, []string{"--host=tcp://0.0.0.0:2375"}, true},
		{[]string{"DOCKER_TLS_CERTDIR=/certs"}, []string{"--host=tcp://0.0.0.0:2376", "--tlsverify"}, false},
		{[]string{"DOCKER_TLS_CERTDIR=/certs"}, []string{"--host=unix:///var/run/docker.sock"}, false},
		{nil, []string{"--tlsverify", "--tlscert", "x"}, false},
	} {
		cmd := exec.Command(shim, tc.args...)
		cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, tc.env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v %v: %v", tc.env, tc.args, err)
		}
		if got := strings.Contains(string(out), "--tls=false"); got != tc.want {
			t.Errorf("env %v args %v: dockerd got %q: --tls=false %v, want %v", tc.env, tc.args, out, got, tc.want)
		}
	}
}
