package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"z.gfire.dev/gvx/runtime/dind"
)

// Agent serves the protocol. The zero value serves with no service.
type Agent struct {
	mu      sync.Mutex
	service *ServiceStatus
}

// Handler returns the agent's HTTP handler.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", a.health)
	mux.HandleFunc("POST /exec", a.exec)
	mux.HandleFunc("GET /file", a.readFile)
	mux.HandleFunc("PUT /file", a.writeFile)
	mux.HandleFunc("GET /archive", a.getArchive)
	mux.HandleFunc("PUT /archive", a.putArchive)
	return mux
}

func (a *Agent) health(w http.ResponseWriter, r *http.Request) {
	h := Health{OK: true}
	a.mu.Lock()
	if a.service != nil {
		s := *a.service
		h.Service = &s
	}
	a.mu.Unlock()
	writeJSON(w, http.StatusOK, h)
}

// StartService starts argv as the agent's service: its output goes to the
// agent's own stdout and stderr, and Health reports its state.
func (a *Agent) StartService(argv []string) error {
	st := &ServiceStatus{Argv: argv}
	a.mu.Lock()
	a.service = st
	a.mu.Unlock()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		a.mu.Lock()
		st.Error = err.Error()
		a.mu.Unlock()
		return err
	}
	a.mu.Lock()
	st.Running = true
	a.mu.Unlock()
	go func() {
		err := cmd.Wait()
		code := exitStatus(cmd.ProcessState)
		a.mu.Lock()
		st.Running, st.ExitCode = false, &code
		if err != nil {
			st.Error = err.Error()
		}
		a.mu.Unlock()
		fmt.Fprintf(os.Stderr, "gvx agent: service %s exited: %v\n", argv[0], err)
	}()
	return nil
}

// Main is the `_gvx-agent` verb: `[--listen=ADDR] [--dind] [-- SERVICE
// ARGV…]`. It listens on ADDR (127.0.0.1:DefaultPort), starts the service
// if one is given, and serves until killed. It returns an exit status.
// With --dind (a privileged episode's service, DaemonCommand) a Docker
// daemon command line gets what the Sentry needs and, when the guest's
// environment and /etc/docker/daemon.json set no TLS up, --tls=false
// (dind.ArgsEnv: a plain-TCP dockerd otherwise sleeps 15 s before it
// serves): only the guest knows the image's environment.
func Main(args []string) int {
	addr, service, err := parseArgs(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gvx agent:", err)
		return 2
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gvx agent:", err)
		return 1
	}
	a := &Agent{}
	if len(service) > 0 {
		if err := a.StartService(service); err != nil {
			fmt.Fprintf(os.Stderr, "gvx agent: service: %v\n", err) // reported by /health too
		}
	}
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 30 * time.Second, MaxHeaderBytes: 64 << 10}
	err = srv.Serve(ln)
	fmt.Fprintln(os.Stderr, "gvx agent:", err)
	return 1
}

// httpError is an error with the HTTP status it answers.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func errorf(code int, format string, args ...any) error {
	return &httpError{code: code, msg: fmt.Sprintf(format, args...)}
}

// writeError answers err as JSON, with its status (500 if it has none;
// 404 for a missing file, 413 for a body over its limit).
func writeError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	var he *httpError
	var mb *http.MaxBytesError
	switch {
	case errors.As(err, &he):
		code = he.code
	case errors.As(err, &mb):
		code = http.StatusRequestEntityTooLarge
	case errors.Is(err, os.ErrNotExist):
		code = http.StatusNotFound
	case errors.Is(err, os.ErrPermission):
		code = http.StatusForbidden
	}
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// guestPath is the request's path parameter: an absolute guest path.
func guestPath(r *http.Request) (string, error) {
	p := r.URL.Query().Get("path")
	if p == "" || !strings.HasPrefix(p, "/") {
		return "", errorf(http.StatusBadRequest, "path %q: want an absolute guest path (?path=/…)", p)
	}
	return p, nil
}

// drain reads what is left of a body (up to a bound) so the connection
// can be reused.
func drain(r io.Reader) { _, _ = io.Copy(io.Discard, io.LimitReader(r, 1<<20)) }

// parseArgs parses Main's arguments into the listen address and the
// service argv, with --dind applied (daemonArgv on the guest's
// environment and daemon.json).
func parseArgs(args []string) (addr string, service []string, err error) {
	addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(DefaultPort))
	isDind := false
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--":
			service = args[i+1:]
			i = len(args)
		case a == dindFlag:
			isDind = true
		case strings.HasPrefix(a, "--listen="):
			addr = strings.TrimPrefix(a, "--listen=")
		default:
			return "", nil, fmt.Errorf("unknown argument %q (want [--listen=ADDR] [--dind] [-- SERVICE...])", a)
		}
	}
	if isDind {
		dj, _ := os.ReadFile("/etc/docker/daemon.json")
		service = daemonArgv(service, os.Environ(), dj)
	}
	return addr, service, nil
}

// daemonArgv is a privileged episode's service as the agent starts it: a
// Docker daemon command line gets dind.ArgsEnv's flags for env and
// daemonJSON; anything else is left alone.
func daemonArgv(service, env []string, daemonJSON []byte) []string {
	return dind.ArgsEnv(service, env, daemonJSON)
}
