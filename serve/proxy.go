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

// maxAgentAnswer is the most of the agent's answer the proxy relays where
// the API's answer is a small JSON object (PUT files, PUT archive): the
// agent is the guest's to replace, and one that streams gigabytes there
// would have the server feed them to a client that reads the answer whole.
const maxAgentAnswer = 1 << 20

// proxy forwards a request for an episode to its agent's path: the query
// and body as they are (bodies up to limit bytes; 0: none expected), the
// agent's status, Content-Type, Content-Length and X-Gvx-Mode back, and
// the body streamed (flushed as it comes: exec's NDJSON). The request
// holds the episode's lease while it runs. Nothing of the client's
// headers (its token) reaches the guest. An answer of more than maxAnswer
// bytes (0: any size) is refused with 502 when its length says so, and
// otherwise cut: the connection to the client is aborted once it passes,
// so the client sees a broken answer, not a short one.
func (s *Server) proxy(path string, limit, maxAnswer int64) http.HandlerFunc {
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
		if maxAnswer > 0 && resp.ContentLength > maxAnswer {
			writeJSON(w, http.StatusBadGateway, map[string]string{"error": fmt.Sprintf(
				"episode %s: the agent answered %d bytes, more than the %d it may (not relayed; the guest may have replaced its agent)",
				e.id, resp.ContentLength, maxAnswer)})
			return
		}
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
		var sent int64
		for {
			n, rerr := resp.Body.Read(b)
			if sent += int64(n); maxAnswer > 0 && sent > maxAnswer {
				if s.cfg.Logf != nil {
					s.cfg.Logf("episode %s: the agent's answer to %s passed %d bytes: cut", e.id, path, maxAnswer)
				}
				panic(http.ErrAbortHandler) // the client must not take what came for the whole answer
			}
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
