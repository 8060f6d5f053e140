package gvx_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"z.gfire.dev/gvx/pkg/gvx"
)

// TestNetModeNAT: a NAT episode reaches a server on the host's loopback
// through the gateway address 10.0.2.2 once its port is in
// AllowHostPorts, and sees slirp's address.
func TestNetModeNAT(t *testing.T) {
	need(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("from the host\n"))
	}))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	portN, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var out, errb bytes.Buffer
	// The SDK's default policy is rungv's: the host's loopback is closed.
	sb := newSandbox(t, ctx, gvx.Config{
		NetworkMode: gvx.NetModeNAT,
		Cmd:         []string{"wget", "-qO-", "http://10.0.2.2:" + port + "/"},
		Stdout:      &out,
		Stderr:      &errb,
	})
	if code, err := sb.Run(ctx); err != nil || code == 0 || out.Len() > 0 || !strings.Contains(errb.String(), "refused") {
		t.Fatalf("without AllowHostPorts: exit %d, %v, %q; stderr %q: want connection refused", code, err, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	sb = newSandbox(t, ctx, gvx.Config{
		NetworkMode:    gvx.NetModeNAT,
		AllowHostPorts: []int{portN},
		Cmd:            []string{"sh", "-c", "wget -qO- http://10.0.2.2:" + port + "/ && ip -4 addr show eth0 | grep -o 'inet [0-9./]*'"},
		Stdout:         &out,
		Stderr:         &errb,
	})
	code, err := sb.Run(ctx)
	if err != nil || code != 0 {
		t.Fatalf("exit %d, %v; stderr %q", code, err, errb.String())
	}
	if want := "from the host\ninet 10.0.2.15/24\n"; out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
}
