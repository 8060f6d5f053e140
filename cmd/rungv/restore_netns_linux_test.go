package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"z.gfire.dev/gvx/runtime/runtimetest"
)

// TestRestoreManyNetns restores an episode whose guest holds many network
// namespaces, as a Compose project's containers do: 16, each with eight
// TCP listeners, four bound sockets and a connected pair on its loopback
// (testdata/netnsrestore), restored four times. Each restore must
// complete, and in every namespace the listeners accept and the pair
// carries a line. The namespaces' stacks are restored with the root's
// (0006-netns-stacks-restore), and their TCP endpoints all count into
// tcpip's one loading barrier, waited on once after every stack has added
// to it (0018-netns-restore-barrier: before, each stack waited on it in a
// goroutine of its own while others added, which panicked the Sentry now
// and then, "sync: WaitGroup is reused before previous Wait has
// returned"; that window is a wake-up's, and these restores did not hit
// it without the patch).
func TestRestoreManyNetns(t *testing.T) {
	need(t, asRoot)
	needPatch(t, "0006-netns-stacks-restore")
	needPatch(t, "0018-netns-restore-barrier")
	// The program is in the image: a checkpoint's guest has no stdin,
	// and seccomp-only mode no bind mounts.
	img := filepath.Join(privateTmp(t, asRoot), "image")
	if err := runtimetest.Busybox(img, v1.Config{Cmd: []string{"/bin/netnsrestore", "-n", "16"}},
		runtimetest.File{Path: "bin/netnsrestore", Mode: 0o755, Body: string(guestProgramBytes(t, "netnsrestore"))}); err != nil {
		t.Fatal(err)
	}
	ref := "oci:" + img
	tmp := privateTmp(t, asRoot)
	ck := filepath.Join(privateTmp(t, asRoot), "ck")
	mode := []string{"--isolation", "seccomp-only", "--network", "none"}
	r := runRungv(t, asRoot, tmp, "", append(append([]string{"checkpoint", "--dir", ck, "--ready", "ready"}, mode...), ref)...)
	if r.code != 0 {
		t.Fatalf("rungv checkpoint: exit %d: %s\n%s", r.code, r.stdout, tail(r.stderr))
	}
	var res struct{ Dir string }
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Dir != ck {
		t.Fatalf("rungv checkpoint printed %q (%v)", r.stdout, err)
	}
	checkClean(t, tmp)
	for i := range 4 {
		tmp := privateTmp(t, asRoot)
		r := runRungv(t, asRoot, tmp, "", append(append([]string{"run", "--restore", ck}, mode...), ref)...)
		if r.code != 0 || strings.TrimSpace(r.stdout) != "ok 16" {
			t.Fatalf("restore %d: exit %d, the guest printed %q\n%s", i, r.code, r.stdout, tail(r.stderr))
		}
		checkClean(t, tmp)
	}
}
