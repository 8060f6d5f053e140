package gvx

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// DockerReady returns a PoolConfig.Ready that passes once the guest's
// Docker daemon answers GET /info (what `docker info` asks) with 200
// through the episode's socket name (PoolConfig.Sockets, e.g. "docker"
// for guest port 2375): the daemon is ready for the caller, from the host.
// It fails with ErrExited if the guest exits first.
func DockerReady(name string) func(ctx context.Context, ep *Episode) error {
	return func(ctx context.Context, ep *Episode) error {
		sock, ok := ep.Sockets[name]
		if !ok {
			return fmt.Errorf("gvx: DockerReady(%q): the pool publishes no socket of that name (PoolConfig.Sockets)", name)
		}
		return WaitDocker(ctx, sock, ep.Done())
	}
}

// WaitDocker polls GET /info on the Docker API socket sock until it
// answers 200, ctx is done, or exited (if not nil) is closed.
func WaitDocker(ctx context.Context, sock string, exited <-chan struct{}) error {
	var d net.Dialer
	tr := &http.Transport{
		DialContext:            func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "unix", sock) },
		DisableKeepAlives:      true,
		MaxResponseHeaderBytes: 64 << 10, // the daemon is the guest's
	}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var last error
	for delay := time.Millisecond; ; delay = min(delay*2, 20*time.Millisecond) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/info", nil)
		resp, err := c.Do(req)
		if err == nil {
			// The answer is the guest's: at most 1 MiB of it is read, a
			// body cut short (or still dripping at ctx's end) is no
			// answer, and its status line is quoted.
			_, rerr := io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			switch {
			case rerr != nil:
				err = fmt.Errorf("GET /info: reading the answer: %w", rerr)
			case resp.StatusCode == http.StatusOK:
				return nil
			default:
				err = fmt.Errorf("GET /info: %q", resp.Status)
			}
		}
		if ctx.Err() == nil || last == nil {
			// An attempt the deadline cut short says less than the
			// answer before it (a status line): keep that one.
			last = err
		}
		select {
		case <-exited:
			return fmt.Errorf("%w before its Docker daemon answered on %s (last: %v)", ErrExited, sock, last)
		case <-ctx.Done():
			return fmt.Errorf("docker daemon on %s: %w (last: %v)", sock, ctx.Err(), last)
		case <-time.After(delay):
		}
	}
}
