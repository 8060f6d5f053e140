package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"z.gfire.dev/gvx/internal/privdir"
)

// ListenUnix listens on the unix socket path, mode 0600 (only the
// server's user may connect). A stale socket file at path (nothing
// listening) is replaced; a live one is an error. The socket is bound in
// a new private directory next to path, chmod'ed there and renamed into
// place (privdir.ListenUnix), so it is never reachable with looser
// permissions, and a user who may write path's directory cannot swap it
// for a symlink to have another file chmod'ed.
func ListenUnix(path string) (net.Listener, error) {
	if st, err := os.Lstat(path); err == nil {
		if st.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("serve: %s exists and is not a socket: remove it or choose another --socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("serve: %s is in use by a live server: stop it or choose another --socket", path)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("serve: remove the stale socket %s: %w", path, err)
		}
	}
	ln, _, err := privdir.ListenUnix(path, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("serve: %s is in use (made by another process meanwhile): stop it or choose another --socket", path)
	}
	if err != nil {
		return nil, fmt.Errorf("serve: socket %s: %w", path, err)
	}
	return &unlinkListener{Listener: ln, path: path}, nil
}

// unlinkListener removes its socket file when closed.
type unlinkListener struct {
	net.Listener
	path string
}

func (l *unlinkListener) Close() error {
	err := l.Listener.Close()
	os.Remove(l.path)
	return err
}

// ErrNoToken refuses a TCP listener without a bearer token.
var ErrNoToken = errors.New("serve: a TCP listener needs a bearer token (rungv serve --token-file FILE, or $GVX_SERVE_TOKEN)")

// ListenTCP listens on the TCP address addr ("127.0.0.1:7300"). The
// caller must serve it with a token (ServeHTTP refuses otherwise).
func ListenTCP(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve: listen on %s: %w", addr, err)
	}
	return ln, nil
}

// ServeHTTP serves the API on ln until ctx is done, then shuts the HTTP
// server down (in-flight requests get a few seconds). A TCP listener
// needs a token. Episodes are not torn down here: Close the Server.
//
// The connections are bounded as Config says (ReadHeaderTimeout,
// IdleTimeout, ReadTimeout, WriteTimeout; MaxConns open at once on ln:
// one more is closed at once), so that idle, slow or never-reading
// clients cannot hold the server's descriptors; streamed answers (exec
// output, downloads) run as long as the client takes them.
func (s *Server) ServeHTTP(ctx context.Context, ln net.Listener, token string) error {
	if _, ok := ln.Addr().(*net.TCPAddr); ok && token == "" {
		return ErrNoToken
	}
	ll := &limitListener{Listener: ln, writeTimeout: s.cfg.WriteTimeout, open: &s.metrics.conns, refused: &s.metrics.connsRefused}
	if s.cfg.MaxConns > 0 {
		ll.sem = make(chan struct{}, s.cfg.MaxConns)
	}
	hs := &http.Server{
		Handler:           bodyDeadlines(s.Handler(token), s.cfg.ReadTimeout),
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ll) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}
