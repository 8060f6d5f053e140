package serve

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"z.gfire.dev/gvx/agent"
)

// maxCreateRequest bounds a create's JSON.
const maxCreateRequest = 1 << 20

// Handler returns the HTTP API (docs/api.md, docs/openapi.yaml). With a
// non-empty token every request must carry "Authorization: Bearer TOKEN"
// (a TCP listener needs one; the unix socket's 0600 mode is its guard).
func (s *Server) Handler(token string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", s.handleHealth)
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		s.WriteMetrics(w)
	})
	mux.HandleFunc("POST /v1/episodes", s.handleCreate)
	mux.HandleFunc("GET /v1/episodes", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"episodes": s.List()})
	})
	mux.HandleFunc("GET /v1/episodes/{id}", func(w http.ResponseWriter, r *http.Request) {
		in, err := s.describe(r.Context(), r.PathValue("id"))
		s.reply(w, in, err)
	})
	mux.HandleFunc("GET /v1/episodes/{id}/service/log", s.handleServiceLog)
	mux.HandleFunc("DELETE /v1/episodes/{id}", func(w http.ResponseWriter, r *http.Request) {
		if err := s.Delete(r.PathValue("id")); err != nil {
			s.writeError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/episodes/{id}/renew", func(w http.ResponseWriter, r *http.Request) {
		in, err := s.Renew(r.PathValue("id"))
		s.reply(w, in, err)
	})
	mux.HandleFunc("POST /v1/episodes/{id}/fork", s.handleFork)
	mux.HandleFunc("POST /v1/episodes/{id}/exec", s.proxy("/exec", agent.MaxExecRequest, 0))
	mux.HandleFunc("GET /v1/episodes/{id}/files", s.proxy("/file", 0, 0))
	mux.HandleFunc("PUT /v1/episodes/{id}/files", s.proxy("/file", s.cfg.MaxUploadBytes, maxAgentAnswer))
	mux.HandleFunc("GET /v1/episodes/{id}/archive", s.proxy("/archive", 0, 0))
	mux.HandleFunc("PUT /v1/episodes/{id}/archive", s.proxy("/archive", s.cfg.MaxUploadBytes, maxAgentAnswer))
	if token == "" {
		return mux
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			// The connection goes with the answer: a client without the
			// token holds none of the server's descriptors after it, nor
			// makes the server wait to drain a body it announced.
			w.Header().Set("Connection", "close")
			if r.Body != nil && r.Body != http.NoBody {
				_ = http.NewResponseController(w).SetReadDeadline(time.Now())
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="rungv serve"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "missing or wrong bearer token (Authorization: Bearer $GVX_SERVE_TOKEN)"})
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// Health is GET /v1/health's answer.
type Health struct {
	OK   bool `json:"ok"`
	Live int  `json:"live"`
	Max  int  `json:"max"`
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := Health{OK: !s.closed, Live: len(s.eps), Max: s.cfg.MaxEpisodes}
	s.mu.Unlock()
	code := http.StatusOK
	if !h.OK {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, h)
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	var req CreateRequest
	if err := decodeBody(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	in, err := s.Create(r.Context(), req)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, in)
}

func (s *Server) handleFork(w http.ResponseWriter, r *http.Request) {
	var req ForkRequest
	if err := decodeBody(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	eps, err := s.Fork(r.Context(), r.PathValue("id"), req)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, ForkReply{Episodes: eps})
}

// decodeBody reads a request body of at most maxCreateRequest bytes that
// holds exactly one JSON object of v's type and no field v lacks.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxCreateRequest))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errors.Join(ErrBadRequest, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return errors.Join(ErrBadRequest, err)
		}
		return fmt.Errorf("%w: more than one JSON value in the body", ErrBadRequest)
	}
	return nil
}

func (s *Server) reply(w http.ResponseWriter, v any, err error) {
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// errorStatus is the HTTP status of err.
func errorStatus(err error) int {
	var mb *http.MaxBytesError
	switch {
	case errors.As(err, &mb): // before ErrBadRequest, which wraps it
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, ErrCapacity):
		return http.StatusTooManyRequests
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrImageNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrNotRunning), errors.Is(err, ErrNotForkable):
		return http.StatusConflict
	case errors.Is(err, ErrClosed):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func (s *Server) writeError(w http.ResponseWriter, err error) {
	code := errorStatus(err)
	if code == http.StatusTooManyRequests {
		secs := int(s.cfg.RetryAfter.Seconds() + 0.999)
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	}
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	writeJSON(w, code, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// drainClose reads what is left of a body (bounded) and closes it.
func drainClose(r io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r, 64<<10))
	r.Close()
}
