package serve

import (
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// What bounds a client's connections to ServeHTTP (Config's fields; zero
// values mean these):
//
//   - ReadHeaderTimeout: a request's line and headers must arrive within
//     it of the request's start (a connection that sends nothing is closed
//     then; a slowloris trickling its headers is cut).
//   - IdleTimeout: a kept-alive connection with no request for that long
//     is closed.
//   - ReadTimeout: a request body the client announced but does not send
//     (no byte for that long) ends the request and its connection. Per
//     read, not per body: an 8 GiB upload takes as long as it needs.
//   - WriteTimeout: an answer the client does not take (no write of it
//     done for that long) ends the request and its connection. Per write,
//     not per answer: an exec's output streams for as long as the command
//     runs, silent or not, and a download as long as it needs.
//   - MaxConns: connections open at once, per listener; one more is
//     closed as soon as it is accepted (and counted in
//     gvx_serve_connections_refused_total).
//
// A request without the bearer token is answered 401 and its connection
// closed (Handler).
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultReadTimeout       = 60 * time.Second
	DefaultWriteTimeout      = 60 * time.Second
	DefaultMaxConns          = 1024
)

// limitListener accepts at most max connections open at once: the one
// over is closed at once and the loop accepts the next, so a flood of
// connections neither holds more descriptors than max nor stops the
// server from accepting once some close. Accept's own errors (EMFILE)
// go to http.Server.Serve as they are, which retries the temporary ones.
// Each connection's writes get a deadline of writeTimeout from the write
// (deadlineConn).
type limitListener struct {
	net.Listener
	sem          chan struct{}
	writeTimeout time.Duration
	open         *atomic.Int64 // gauge, across listeners
	refused      *atomic.Int64
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.sem != nil {
			select {
			case l.sem <- struct{}{}:
			default:
				c.Close()
				l.refused.Add(1)
				continue
			}
		}
		l.open.Add(1)
		return &deadlineConn{Conn: c, l: l, writeTimeout: l.writeTimeout}, nil
	}
}

// deadlineConn is an accepted connection: every Write must be done
// within writeTimeout of its start, and Close gives its slot back.
type deadlineConn struct {
	net.Conn
	l            *limitListener
	writeTimeout time.Duration
	once         sync.Once
}

func (c *deadlineConn) Write(b []byte) (int, error) {
	if c.writeTimeout > 0 {
		if err := c.Conn.SetWriteDeadline(time.Now().Add(c.writeTimeout)); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(b)
}

func (c *deadlineConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		if c.l.sem != nil {
			<-c.l.sem
		}
	})
	return err
}

// bodyDeadlines gives a request body a read deadline of d from the
// request's start and from each read of it, until it has been read to
// its end (net/http then reads the connection in the background with no
// deadline, to see the client go; a deadline then would end a long exec
// or download). A request without a body is left alone for that reason.
// A body not read (a 401, a 404) is thus still bounded when net/http
// drains it after the handler.
func bodyDeadlines(h http.Handler, d time.Duration) http.Handler {
	if d <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(d)) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc, d: d}
			}
		}
		h.ServeHTTP(w, r)
	})
}

type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	d    time.Duration
	done bool // read to its end or failed: no deadline any more
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	if b.done {
		return b.ReadCloser.Read(p)
	}
	_ = b.rc.SetReadDeadline(time.Now().Add(b.d))
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.done = true
	}
	return n, err
}
