package gvx_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"z.gfire.dev/gvx/pkg/gvx"
)

// TestNetModeNAT: a NAT episode reaches a server on the host's loopback
// through the gateway address 10.0.2.2, and sees slirp's address.
func TestNetModeNAT(t *testing.T) {
	need(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("from the host\n"))
	}))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	ctx := context.Background()
	var out, errb bytes.Buffer
	sb := newSandbox(t, ctx, gvx.Config{
		NetworkMode: gvx.NetModeNAT,
		Cmd:         []string{"sh", "-c", "wget -qO- http://10.0.2.2:" + port + "/ && ip -4 addr show eth0 | grep -o 'inet [0-9./]*'"},
		Stdout:      &out,
		Stderr:      &errb,
	})
	code, err := sb.Run(ctx)
	if err != nil || code != 0 {
		t.Fatalf("exit %d, %v; stderr %q", code, err, errb.String())
	}
	if want := "from the host\ninet 10.0.2.15/24\n"; out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
}
