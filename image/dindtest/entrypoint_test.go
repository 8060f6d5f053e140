package dindtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// entrypointScript cuts dockerd-entrypoint.sh out of the rootfs script.
func entrypointScript(t *testing.T) string {
	_, rest, ok := strings.Cut(rootfsScript, "<<'ENTRY'\n")
	body, _, ok2 := strings.Cut(rest, "\nENTRY\n")
	if !ok || !ok2 {
		t.Fatal("rootfs.sh has no ENTRY heredoc")
	}
	return body + "\n"
}

// TestEntrypoint runs the image's entrypoint with a stand-in dockerd that
// prints its arguments, as the seeds call it.
func TestEntrypoint(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	ep := filepath.Join(dir, Entrypoint)
	if err := os.WriteFile(ep, []byte(entrypointScript(t)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dockerd"), []byte("#!/bin/sh\necho dockerd \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	const both = " --host=unix:///var/run/docker.sock --host=tcp://0.0.0.0:2375"
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"seed usage", []string{"DOCKER_TLS_CERTDIR="}, []string{"--tls=false"}, "dockerd --tls=false" + both},
		{"no args", nil, nil, "dockerd" + both},
		{"TLS dir set: socket only", []string{"DOCKER_TLS_CERTDIR=/certs"}, []string{"--tls=false"}, "dockerd --tls=false --host=unix:///var/run/docker.sock"},
		{"explicit host", nil, []string{"-H", "unix:///run/d.sock", "--debug"}, "dockerd -H unix:///run/d.sock --debug"},
		{"explicit --host=", nil, []string{"--host=tcp://0.0.0.0:1"}, "dockerd --host=tcp://0.0.0.0:1"},
		{"dockerd named", nil, []string{"dockerd", "--tls=false"}, "dockerd --tls=false" + both},
		{"extra flags", []string{"DOCKERD_EXTRA_FLAGS=--iptables=false --ip6tables=false"}, []string{"--tls=false"}, "dockerd --tls=false" + both + " --iptables=false --ip6tables=false"},
		{"a command", nil, []string{"echo", "plain", "command"}, "plain command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := exec.Command(ep, tc.args...)
			c.Env = append([]string{"PATH=" + dir + ":/usr/bin:/bin"}, tc.env...)
			out, err := c.Output()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if got := strings.TrimSpace(string(out)); got != tc.want {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
