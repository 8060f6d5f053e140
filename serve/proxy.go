package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// validMode reports whether v is a permission mode as the agent writes
// it: one to five octal digits ("0644", "04755").
func validMode(v string) bool {
	if len(v) == 0 || len(v) > 5 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '7' {
			return false
		}
	}
	return true
}

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
		// Of the agent's (the guest's) headers only these three pass, and
		// only in the forms the API names: the length Go's client parsed
		// (and holds the body to), a mode of octal digits.
		if v := resp.Header.Get("Content-Type"); v != "" {
			w.Header().Set("Content-Type", v)
		}
		if resp.ContentLength >= 0 {
			w.Header().Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
		}
		if v := resp.Header.Get("X-Gvx-Mode"); validMode(v) {
			w.Header().Set("X-Gvx-Mode", v)
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
