package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"z.gfire.dev/gvx/image/dindtest"
	"z.gfire.dev/gvx/reflink"
)

// TestRestoreDockerd is issue 16's restore path through the CLI, with
// bookworm's dockerd on an ext4lite volume (seccomp-only, the one mode
// with checkpoints; --network none): a golden volume with an image
// loaded; rungv checkpoint of a daemon booted on a clone of it, once its
// API answers; two restores, each on its own clone of the companion
// volume and with its own socket. Each answers docker info, runs the
// golden's image, and sees its own tag only; the companion is unchanged.
// gVisor saves the network stack without its links: the daemon's docker0
// is made again by the guest's relay, and the runs use the default
// network to show it.
func TestRestoreDockerd(t *testing.T) {
	s := needDind(t, dindtest.Bookworm)
	need(t, asRoot)
	tmp, dir := privateTmp(t, asRoot), privateTmp(t, asRoot)
	mode := []string{"--isolation", "seccomp-only", "--network", "none"}

	golden := filepath.Join(dir, "golden.ext4")
	g := startDaemon(t, s, asRoot, tmp, privateTmp(t, asRoot), "type=volume,src="+golden+",dst=/var/lib/docker,size=4G", mode...)
	g.must("load", "-i", s.hello)
	g.stop()

	clone := func(src, dst string) {
		t.Helper()
		if _, err := reflink.CloneFile(src, dst, reflink.Options{Mode: reflink.Auto}); err != nil {
			t.Fatal(err)
		}
	}
	boot := filepath.Join(dir, "boot.ext4")
	clone(golden, boot)
	ck, sock := filepath.Join(dir, "ck"), filepath.Join(privateTmp(t, asRoot), "boot.sock")
	args := append(append([]string{"checkpoint", "--dir", ck}, mode...),
		"-p", "unix:"+sock+":2375", "-e", "DOCKER_TLS_CERTDIR=",
		"--mount", "type=volume,src="+boot+",dst=/var/lib/docker",
		"--ready-socket", sock, "oci:"+s.layout, "--tls=false")
	c := command(t, asRoot, tmp, args...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		t.Fatalf("rungv checkpoint: %v\n%s", err, tail(errb.String()))
	}
	var res struct {
		Dir     string
		Volumes []string
		Ready   float64 `json:"ready_seconds"`
		Save    float64 `json:"checkpoint_seconds"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || len(res.Volumes) != 1 {
		t.Fatalf("rungv checkpoint printed %q (%v)", out.String(), err)
	}
	t.Logf("checkpoint: ready after %.2f s, saved in %.2f s", res.Ready, res.Save)
	before := fileDigest(t, res.Volumes[0])

	var ds []*daemon
	for _, name := range []string{"ep1", "ep2"} {
		vol := filepath.Join(dir, name+".ext4")
		clone(res.Volumes[0], vol)
		d := startDaemon(t, s, asRoot, tmp, privateTmp(t, asRoot), "type=volume,src="+vol+",dst=/var/lib/docker", append(mode, "--restore", ck)...)
		// On the default network: docker0 is made again by the relay
		// (runtime/relaylinks_linux.go), gVisor saves no links.
		if got := d.must("run", "--rm", "hello:latest", "echo", "hi from "+name); strings.TrimSpace(got) != "hi from "+name {
			t.Fatalf("%s: docker run printed %q", name, got)
		}
		if got := d.must("network", "inspect", "bridge", "--format", "{{range .IPAM.Config}}{{.Gateway}}{{end}}"); strings.TrimSpace(got) == "" {
			t.Errorf("%s: the default bridge has no gateway after the restore: %q", name, got)
		}
		d.must("tag", "hello:latest", "mine-"+name)
		ds = append(ds, d)
	}
	for i, d := range ds {
		imgs := d.must("images", "--format", "{{.Repository}}")
		mine, other := "mine-ep"+string(rune('1'+i)), "mine-ep"+string(rune('2'-i))
		if !strings.Contains(imgs, mine) || strings.Contains(imgs, other) {
			t.Errorf("restore %d lists %q: want %s, not %s", i+1, imgs, mine, other)
		}
	}
	for _, d := range ds {
		d.stop()
	}
	if fileDigest(t, res.Volumes[0]) != before {
		t.Error("the companion volume changed")
	}
	checkClean(t, tmp)
}

// TestCheckpointRefusals: what cannot be checkpointed or restored is
// refused before anything starts, with the fix in the message.
func TestCheckpointRefusals(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		for _, c := range []struct {
			args []string
			code int
			want string
		}{
			{[]string{"run", "--isolation", "namespaces", "--network", "none", "--restore", tmp, imageRef}, 125, "need --isolation seccomp-only"},
			{[]string{"run", "--isolation", "namespaces", "--network", "none", "--checkpoint-dir", tmp + "/ck", imageRef, "true"}, 125, "need --isolation seccomp-only"},
			{[]string{"run", "--isolation", "seccomp-only", "--network", "none", "--restore", tmp + "/none", imageRef}, 125, "not a checkpoint directory made by rungv checkpoint"},
			{[]string{"checkpoint", "--dir", tmp + "/ck", "--network", "none", imageRef, "true"}, 2, "--ready-socket PATH or --ready TEXT"},
			{[]string{"checkpoint", "--dir", tmp + "/ck", "--isolation", "seccomp-only", "--network", "none", "--ready", "never", imageRef, "true"}, 125, "ended before it was ready"},
		} {
			r := runRungv(t, u, tmp, "", c.args...)
			if r.code != c.code || !strings.Contains(r.stderr, c.want) {
				t.Errorf("rungv %v: exit %d, stderr %q; want %d and %q", c.args, r.code, r.stderr, c.code, c.want)
			}
		}
		checkClean(t, tmp)
	})
}
