package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"z.gfire.dev/gvx/agent"
	"z.gfire.dev/gvx/pkg/gvx"
)

// The service: CreateRequest.Spec's entrypoint and args, which the agent
// runs in the guest (agent.Agent.StartService). The server knows its state
// from the agent's /health and, with WaitDocker, from probing its Docker
// daemon; its output is the episode's (e.output): the tail the server
// keeps, streamed by GET /v1/episodes/{id}/service/log.
const (
	// serviceProbeEvery is how often a create that waits for Docker asks
	// the agent how the service is doing (a service that exits fails the
	// create then, not at the ready timeout).
	serviceProbeEvery = 100 * time.Millisecond
	// serviceProbeTimeout bounds one question to the agent.
	serviceProbeTimeout = 2 * time.Second
	// maxHealthAnswer bounds the agent's /health answer read (the
	// guest's).
	maxHealthAnswer = 64 << 10
	// maxServiceError bounds the service error kept from the agent.
	maxServiceError = 1 << 10
	// logChunk is the most of the log written at once to a follower.
	logChunk = 64 << 10
)

// serviceArgv is req's service: its spec's entrypoint and args.
func serviceArgv(req *CreateRequest) []string {
	if req.Spec == nil {
		return nil
	}
	return append(append([]string{}, req.Spec.Entrypoint...), req.Spec.Args...)
}

// waitsForDocker says whether req's create answers only once its Docker
// daemon does (CreateRequest.Wait).
func waitsForDocker(req *CreateRequest) bool {
	switch req.Wait {
	case WaitDocker:
		return true
	case "":
		return req.Docker && len(serviceArgv(req)) > 0
	}
	return false
}

// checkWait validates req.Wait.
func checkWait(req *CreateRequest) error {
	switch req.Wait {
	case "", WaitAgent:
		return nil
	case WaitDocker:
		if !req.Docker {
			return fmt.Errorf("%w: wait %q needs \"docker\": true (the socket it probes)", ErrBadRequest, req.Wait)
		}
		if len(serviceArgv(req)) == 0 {
			return fmt.Errorf("%w: wait %q needs a service that runs the daemon (spec.entrypoint, dockerd say)", ErrBadRequest, req.Wait)
		}
		return nil
	}
	return fmt.Errorf("%w: wait %q: want %q or %q", ErrBadRequest, req.Wait, WaitAgent, WaitDocker)
}

// refreshService asks the agent how the service is doing and records it.
// An agent that does not answer, or answers nonsense, changes nothing.
func (e *episode) refreshService(ctx context.Context) {
	e.mu.Lock()
	ac, has := e.agent, e.service != nil
	e.mu.Unlock()
	if !has || ac == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, serviceProbeTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/health", nil)
	resp, err := ac.Do(req)
	if err != nil {
		return
	}
	defer drainClose(resp.Body)
	var h agent.Health
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, maxHealthAnswer)).Decode(&h) != nil || h.Service == nil {
		return
	}
	e.setService(h.Service)
}

// setService records st, the agent's word on the service.
func (e *episode) setService(st *agent.ServiceStatus) {
	e.mu.Lock()
	defer e.mu.Unlock()
	sv := e.service
	if sv.State == ServiceExited || sv.State == ServiceFailed {
		return // it is not started again
	}
	switch {
	case st.ExitCode != nil:
		code := *st.ExitCode
		sv.State, sv.ExitCode = ServiceExited, &code
	case !st.Running && st.Error != "":
		sv.State = ServiceFailed
	case !st.Running:
		return
	case e.dockerReady:
		sv.State = ServiceReady
	case e.waitDocker:
		sv.State = ServiceStarting
	default:
		sv.State = ServiceRunning
	}
	sv.Error = clip(st.Error, maxServiceError)
}

// clip is s cut to at most n bytes.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// serviceState is a copy of the service's state.
func (e *episode) serviceState() ServiceInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	return *e.service
}

// waitService records how the service is doing once the agent answers
// and, with waitDocker, waits until its Docker daemon answers GET /info
// (gvx.WaitDocker, as warm episodes are probed), the service ends, the
// episode exits or ctx is done (the ready timeout). Its errors end with
// the tail of the episode's output, the service's log.
func (s *Server) waitService(ctx context.Context, e *episode) error {
	if e.service == nil {
		return nil
	}
	e.refreshService(ctx)
	if !e.waitDocker {
		return nil
	}
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	docker := make(chan error, 1)
	go func() { docker <- gvx.WaitDocker(dctx, e.dockerSock, e.runDone) }()
	tick := time.NewTicker(serviceProbeEvery)
	defer tick.Stop()
	for {
		select {
		case err := <-docker:
			if err == nil {
				e.mu.Lock()
				e.dockerReady = true
				if e.service.State == ServiceStarting {
					e.service.State = ServiceReady
				}
				e.mu.Unlock()
				return nil
			}
			select {
			case <-e.runDone:
				return e.startError("exited before its Docker daemon answered")
			default:
			}
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return e.serviceError(fmt.Sprintf("did not answer GET /info within the ready timeout (%v, rungv serve --ready-timeout)", s.cfg.ReadyTimeout))
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return e.serviceError(err.Error())
		case <-tick.C:
			e.refreshService(dctx)
			if sv := e.serviceState(); sv.State == ServiceExited || sv.State == ServiceFailed {
				return e.serviceError("did not answer")
			}
		}
	}
}

// serviceError says why the episode's Docker daemon is not ready: what
// (how the wait ended), the service's state and its log's tail.
func (e *episode) serviceError(what string) error {
	sv := e.serviceState()
	state := sv.State
	switch {
	case sv.State == ServiceExited && sv.ExitCode != nil:
		state = "exited with status " + strconv.Itoa(*sv.ExitCode)
	case sv.State == ServiceFailed:
		state = "could not be started: " + sv.Error
	default:
		state = "is " + ServiceRunning
	}
	msg := fmt.Sprintf("episode %s: its Docker daemon (socket %s) %s; the service %s %s", e.id, e.dockerSock, what, quoteArgv(sv.Argv), state)
	if out := strings.TrimSpace(e.output.String()); out != "" {
		msg += "; its log ends: " + strconv.Quote(out) // the guest's: one line, no escapes
	} else {
		msg += "; its log is empty"
	}
	return errors.New(msg)
}

// quoteArgv is argv for a message, each word quoted, at most 512 bytes.
func quoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = strconv.Quote(a)
	}
	return "[" + clip(strings.Join(q, " "), 512) + "]"
}

// describe is Get with the service's state asked of the agent first.
func (s *Server) describe(ctx context.Context, id string) (EpisodeInfo, error) {
	s.mu.Lock()
	e, ok := s.eps[id]
	s.mu.Unlock()
	if !ok {
		_, err := s.get(id)
		return EpisodeInfo{}, err
	}
	e.refreshService(ctx)
	return e.info(), nil
}

// handleServiceLog is GET /v1/episodes/{id}/service/log[?follow=1]: the
// tail of the episode's output the server keeps (its last 64 KiB: the
// service's output, with the agent's and rungv's own lines) and, with
// follow, what comes after, until the episode ends or the client goes.
// Starting episodes have one too: a create that waits for Docker can be
// watched. A follower too slow for the output is told how many bytes it
// missed. The request holds the episode's lease, as any does.
func (s *Server) handleServiceLog(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	e, ok := s.eps[id]
	s.mu.Unlock()
	if !ok {
		_, err := s.get(id)
		s.writeError(w, err)
		return
	}
	follow := false
	switch v := r.URL.Query().Get("follow"); v {
	case "", "0", "false":
	case "1", "true":
		follow = true
	default:
		s.writeError(w, fmt.Errorf("%w: follow=%q: want 1 or 0", ErrBadRequest, v))
		return
	}
	defer e.touch()()
	w.Header().Set("Content-Type", "application/octet-stream") // the guest's bytes
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	off := int64(-1)
	ended := false
	for {
		b, next, lost, more := e.output.since(off, logChunk)
		if lost > 0 && off >= 0 {
			if _, err := fmt.Fprintf(w, "\n[gvx: %d bytes of the log were not kept: this reader fell behind]\n", lost); err != nil {
				return
			}
		}
		off = next
		if len(b) > 0 {
			if _, err := w.Write(b); err != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
			if follow {
				continue // there may be more at once
			}
		}
		if !follow || ended {
			return
		}
		select {
		case <-more:
		case <-e.runDone: // the output is complete: what is left, then the end
			ended = true
		case <-r.Context().Done():
			return
		}
	}
}
