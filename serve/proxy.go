package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// proxy forwards a request for an episode to its agent's path: the query
// and body as they are (bodies up to limit bytes; 0: none expected), the
// agent's status, Content-Type, Content-Length and X-Gvx-Mode back, and
// the body streamed (flushed as it comes: exec's NDJSON). The request
// holds the episode's lease while it runs. Nothing of the client's
// headers (its token) reaches the guest.
func (s *Server) proxy(path string, limit int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		e, err := s.get(r.PathValue("id"))
		if err != nil {
			s.writeError(w, err)
			return
		}
		defer e.touch()()
		if path == "/exec" {
			s.metrics.execs.Add(1)
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		go func() { // a teardown ends the request
			select {
			case <-e.runDone:
				cancel()
			case <-ctx.Done():
			}
		}()
		var body io.Reader = http.NoBody
		if limit > 0 {
			body = http.MaxBytesReader(w, r.Body, limit)
		}
		u := &url.URL{Scheme: "http", Host: "agent", Path: path, RawQuery: r.URL.RawQuery}
		out, err := http.NewRequestWithContext(ctx, r.Method, u.String(), body)
		if err != nil {
			s.writeError(w, err)
			return
		}
		if limit > 0 {
			out.ContentLength = r.ContentLength
			if ct := r.Header.Get("Content-Type"); ct != "" {
				out.Header.Set("Content-Type", ct)
			}
		}
		resp, err := e.agent.Do(out)
		if err != nil {
			var mb *http.MaxBytesError
			if errors.As(err, &mb) {
				s.writeError(w, mb)
				return
			}
			s.writeError(w, fmt.Errorf("episode %s: agent: %w", e.id, err))
			return
		}
		defer resp.Body.Close()
		for _, h := range []string{"Content-Type", "Content-Length", "X-Gvx-Mode"} {
			if v := resp.Header.Get(h); v != "" {
				w.Header().Set(h, v)
			}
		}
		w.WriteHeader(resp.StatusCode)
		fl, _ := w.(http.Flusher)
		b := make([]byte, 256<<10)
		for {
			n, rerr := resp.Body.Read(b)
			if n > 0 {
				if _, werr := w.Write(b[:n]); werr != nil {
					return
				}
				if fl != nil && path == "/exec" {
					fl.Flush()
				}
			}
			if rerr != nil {
				return
			}
		}
	}
}
