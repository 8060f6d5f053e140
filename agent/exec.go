package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// outputGrace is how long a finished command's output pipes may stay open
// (a background child holding them) before the stream ends without them.
const outputGrace = 200 * time.Millisecond

func (a *Agent) exec(w http.ResponseWriter, r *http.Request) {
	var req ExecRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxExecRequest))
	if err := dec.Decode(&req); err != nil {
		writeError(w, errorf(http.StatusBadRequest, "exec request: %v", err))
		return
	}
	argv, err := req.argv()
	if err != nil {
		writeError(w, err)
		return
	}
	if err := checkWorkdir(req.Workdir); err != nil {
		writeError(w, err)
		return
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), req.Env...)
	cmd.Dir = req.Workdir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if len(req.Stdin) > 0 {
		cmd.Stdin = bytes.NewReader(req.Stdin)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		writeError(w, err)
		return
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		writeError(w, err)
		return
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	t0 := time.Now()
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		code := http.StatusBadRequest
		if !errors.Is(err, exec.ErrNotFound) && !errors.Is(err, os.ErrNotExist) {
			code = http.StatusInternalServerError
		}
		if werr := checkWorkdir(req.Workdir); werr != nil {
			err, code = werr, http.StatusBadRequest // it went between the check and the start
		}
		writeError(w, errorf(code, "exec %s: %v", argv[0], err))
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	s := &stream{w: w, enc: json.NewEncoder(w)}
	s.flush()

	var readers sync.WaitGroup
	readers.Add(2)
	go s.copy(&readers, EventStdout, outR)
	go s.copy(&readers, EventStderr, errR)

	var timeout <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(time.Duration(req.Timeout * float64(time.Second)))
		defer t.Stop()
		timeout = t.C
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	timedOut := false
	select {
	case <-waited:
	case <-timeout:
		timedOut = true
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-waited
	case <-r.Context().Done(): // the server went away: so does the command
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-waited
	}
	// Output written before the exit is in the pipes; a background child
	// that still holds them gets outputGrace, then the stream goes on
	// without it.
	done := make(chan struct{})
	go func() { readers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(outputGrace):
		outR.Close()
		errR.Close()
		<-done
	}
	outR.Close()
	errR.Close()
	code := exitStatus(cmd.ProcessState)
	s.send(Event{Type: EventExit, ExitCode: &code, TimedOut: timedOut, Seconds: time.Since(t0).Seconds()})
}

// checkWorkdir refuses an exec's workdir that is not an existing
// directory, naming it: the start's own error (chdir fails in the child)
// blames the program ("fork/exec /bin/sh: no such file or directory").
func checkWorkdir(dir string) error {
	if dir == "" {
		return nil
	}
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return errorf(http.StatusBadRequest, "workdir %s: no such directory in the episode (make it first, or give another)", dir)
	case err != nil:
		return errorf(http.StatusBadRequest, "workdir %s: %v", dir, err)
	case !st.IsDir():
		return errorf(http.StatusBadRequest, "workdir %s: not a directory", dir)
	}
	return nil
}

// argv is the command line the request asks for.
func (req *ExecRequest) argv() ([]string, error) {
	switch {
	case len(req.Argv) > 0 && req.Shell != "":
		return nil, errorf(http.StatusBadRequest, "exec request: argv and shell are exclusive")
	case len(req.Argv) > 0:
		return req.Argv, nil
	case req.Shell != "":
		return []string{"/bin/sh", "-c", req.Shell}, nil
	}
	return nil, errorf(http.StatusBadRequest, "exec request: want argv or shell")
}

// stream writes Events as JSON lines, one at a time, flushed.
type stream struct {
	mu  sync.Mutex
	w   http.ResponseWriter
	enc *json.Encoder
}

func (s *stream) send(e Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.enc.Encode(e)
	s.flush()
}

func (s *stream) flush() {
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *stream) copy(wg *sync.WaitGroup, typ string, r io.Reader) {
	defer wg.Done()
	b := make([]byte, chunk)
	for {
		n, err := r.Read(b)
		if n > 0 {
			s.send(Event{Type: typ, Data: b[:n]})
		}
		if err != nil {
			return
		}
	}
}

// exitStatus is the status as a shell reports it: 128+N for signal N.
func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
