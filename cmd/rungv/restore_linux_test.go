package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"z.gfire.dev/gvx/image/dindtest"
	"z.gfire.dev/gvx/reflink"
)

// TestRestoreDockerd is issue 16's restore path through the CLI, with
// bookworm's dockerd on an ext4lite volume (seccomp-only, the one mode
// with checkpoints), once per network mode: a golden volume with an image
// loaded; rungv checkpoint of a daemon booted on a clone of it, once its
// API answers; two restores, each on its own clone of the companion
// volume and with its own socket. Each answers docker info, runs the
// golden's image, and sees its own tag only; the companion is unchanged.
// gVisor saves the network stack without its links: the daemon's docker0
// is made again by the guest's relay, and the runs use the default
// network to show it. With --network nat each restore has a NAT of its
// own, and a container on the default bridge fetches from the test's
// server on the host's loopback (its port allowed) through it.
func TestRestoreDockerd(t *testing.T) {
	s := needDind(t, dindtest.Bookworm)
	need(t, asRoot)
	tmp, dir := privateTmp(t, asRoot), privateTmp(t, asRoot)
	golden := filepath.Join(dir, "golden.ext4")
	g := startDaemon(t, s, asRoot, tmp, privateTmp(t, asRoot), "type=volume,src="+golden+",dst=/var/lib/docker,size=4G", "--isolation", "seccomp-only", "--network", "none")
	g.must("load", "-i", s.hello)
	g.stop()

	port, arm := armedServer(t)
	for _, netw := range []string{"none", "nat"} {
		t.Run(netw, func(t *testing.T) {
			mode := []string{"--isolation", "seccomp-only", "--network", netw}
			if netw == "nat" {
				mode = append(mode, "--allow-host-port", strconv.Itoa(port))
			}
			testRestoreDockerd(t, s, tmp, filepath.Join(dir, netw), golden, mode, func(name string, d *daemon) {
				if netw != "nat" {
					return
				}
				arm("served to " + name)
				url := "http://10.0.2.2:" + strconv.Itoa(port) + "/blob"
				if got := d.must("run", "--rm", "hello:latest", "sh", "-c", "wget -qO- "+url); got != "served to "+name {
					t.Errorf("%s: a container on the default bridge fetched %q from the host's loopback", name, got)
				}
			})
		})
	}
	checkClean(t, tmp)
}

// testRestoreDockerd checkpoints a dockerd booted on a clone of golden
// with mode's flags, restores it twice (each on its own clone, under
// dir) and runs check on each restored daemon.
func testRestoreDockerd(t *testing.T, s dindSetup, tmp, dir, golden string, mode []string, check func(name string, d *daemon)) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
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
		// (runtime/net/relaylinks_linux.go), gVisor saves no links.
		if got := d.must("run", "--rm", "hello:latest", "echo", "hi from "+name); strings.TrimSpace(got) != "hi from "+name {
			t.Fatalf("%s: docker run printed %q", name, got)
		}
		if got := d.must("network", "inspect", "bridge", "--format", "{{range .IPAM.Config}}{{.Gateway}}{{end}}"); strings.TrimSpace(got) == "" {
			t.Errorf("%s: the default bridge has no gateway after the restore: %q", name, got)
		}
		check(name, d)
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
