package gvx_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"z.gfire.dev/gvx/pkg/gvx"
	"z.gfire.dev/gvx/spec"
)

// TestForkNAT: a NAT episode that has used its network is forked into
// two; the parent and each child (a restore with a NAT of its own) reach
// the test's server on the host's loopback through 10.0.2.2 (its port
// allowed), keep eth0 and resolv.conf, and stay refused the metadata
// address and the host's other ports under the spec's egress policy,
// which the children inherit.
func TestForkNAT(t *testing.T) {
	ctx := context.Background()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("hi " + r.URL.Query().Get("who") + "\n"))
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler()) // listening, never allowed
	defer closed.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	other := "10.0.2.2:" + strconv.Itoa(closed.Listener.Addr().(*net.TCPAddr).Port)
	_, parent := startCounter(t, ctx, func(s *spec.Spec) {
		s.Network = spec.NetworkNAT
		s.AllowHostPorts = []int{port}
	})
	fetch := func(e *episode, name string) {
		t.Helper()
		got := e.do(t, name+"f", "wget -qO- http://10.0.2.2:"+strconv.Itoa(port)+"/?who="+name)
		if !strings.Contains(got, "hi "+name+"\n") {
			t.Errorf("%s: no answer from the host's loopback: %q", name, got)
		}
	}
	fetch(parent, "before")

	for i, e := range forkEpisodes(t, ctx, parent, 2) {
		name := []string{"parent", "kid0", "kid1"}[i]
		fetch(e, name)
		for j, p := range []string{"169.254.169.254", other} {
			tag := name + "p" + strconv.Itoa(j)
			got := e.do(t, tag, "if wget -qO- http://"+p+"/ >/dev/null 2>/tmp/e; then echo "+tag+" reached; else echo "+tag+" $(cat /tmp/e); fi")
			m := regexp.MustCompile(`(?m)^` + tag + ` (.*)$`).FindStringSubmatch(got)
			if m == nil || !strings.Contains(m[1], "refused") {
				t.Errorf("%s: %s must be refused: %q", name, p, m)
			}
		}
		got := e.do(t, name+"v", "ip -4 addr show eth0; cat /etc/resolv.conf")
		if !strings.Contains(got, "inet 10.0.2.15/24") || !strings.Contains(got, "nameserver 10.0.2.3") {
			t.Errorf("%s: eth0 or resolv.conf changed: %q", name, got)
		}
	}
}

// TestWarmRestoreNAT: a warm pool refilled by restores of a NAT
// checkpoint: the saved guest waits for the test's server on the host's
// loopback, which answers only after the save, so each episode handed out
// got its answer through a NAT of its own (each request numbered by the
// server; every episode shows a different one).
func TestWarmRestoreNAT(t *testing.T) {
	need(t)
	poolEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var armed atomic.Bool
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !armed.Load() {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, "answer-%d", served.Add(1))
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	dir, mode := poolDirs(t)
	vol := filepath.Join(dir, "boot.ext4")
	makeGolden(t, vol)
	url := "http://10.0.2.2:" + strconv.Itoa(port) + "/"
	s := &spec.Spec{
		Version: spec.Version, Image: imageRef, Network: spec.NetworkNAT, AllowHostPorts: []int{port}, Isolation: spec.IsolationSeccompOnly,
		Entrypoint: []string{"sh", "-c"},
		Args:       []string{"echo waiting; until wget -qO /tmp/a " + url + " 2>/dev/null; do sleep 0.1; done; echo got $(cat /tmp/a); exec sleep 100000"},
		Mounts:     []spec.Mount{{Type: spec.MountVolume, Source: vol, Target: "/data"}},
	}
	cp, _ := checkpointSpec(t, ctx, s, dir, `(?m)^waiting$`)
	armed.Store(true)

	scratch := filepath.Join(dir, "episodes")
	p, err := gvx.NewPool(gvx.PoolConfig{
		Checkpoint: cp, ScratchDir: scratch, CloneMode: mode, Warm: 2,
		Base:  gvx.Config{Rungv: rungvBin},
		Ready: func(ctx context.Context, ep *gvx.Episode) error { return ep.WaitOutput(ctx, "got answer-") },
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := range 3 {
		ep, err := p.Claim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := ep.WaitOutput(ctx, "got answer-"); err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`got (answer-\d+)`).FindStringSubmatch(string(ep.Stdout()))
		if m == nil || seen[m[1]] {
			t.Errorf("claim %d: %q: want an answer of its own", i, ep.Stdout())
		} else {
			seen[m[1]] = true
		}
		ep.Close()
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	scratchEmpty(t, scratch)
}
