package gvx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"z.gfire.dev/gvx/spec"
)

// Platform selects how the Sentry intercepts guest system calls.
type Platform string

// Platforms.
const (
	// PlatformAuto lets rungv choose (systrap: needs no /dev/kvm).
	PlatformAuto    Platform = ""
	PlatformSystrap Platform = "systrap"
	PlatformPtrace  Platform = "ptrace"
	PlatformKVM     Platform = "kvm"
)

// NetworkMode selects the guest's network.
type NetworkMode int

// Network modes.
const (
	// NetModeNone gives the guest loopback only.
	NetModeNone NetworkMode = iota
	// NetModeNAT gives the guest a user-space netstack with outbound NAT,
	// slirp's layout: 10.0.2.15/24, gateway 10.0.2.2 (the host's
	// 127.0.0.1 on Config.AllowHostPorts only), DNS 10.0.2.3 (the host's
	// first nameserver). TCP and UDP leave through the host's own sockets
	// (rungv run --network nat) to the outside world only, unless
	// Config.Egress allows more.
	NetModeNAT
)

// MountKind is the kind of a Mount.
type MountKind int

// Mount kinds.
const (
	// MountVolume mounts an ext4 volume file (ImagePath) read-write,
	// served by ext4lite: guest writes land in that one file.
	MountVolume MountKind = iota
	// MountBind mounts a host directory (ImagePath).
	MountBind
	// MountTmpfs mounts an empty in-memory filesystem (no ImagePath).
	MountTmpfs
)

// Mount is a filesystem mounted into the guest at GuestPath.
type Mount struct {
	Kind      MountKind
	ImagePath string // host path: the volume file or the directory
	GuestPath string // absolute path in the guest
	ReadOnly  bool
}

// Port publishes GuestPort (TCP, in the guest) on the host: as the unix
// socket HostSocket, or on the TCP address HostAddr ("127.0.0.1:8080";
// set one of the two).
type Port struct {
	HostSocket string
	HostAddr   string
	GuestPort  int
}

// Resources bound what the episode costs the host (and shape what the
// guest sees). Zero means the host's, except PidsLimit (0: rungv's default,
// 4096 host tasks; negative: none).
type Resources struct {
	MemoryBytes int64
	CPUMillis   int64 // 1000 = one CPU
	PidsLimit   int
	// BestEffort starts an episode whose memory or CPU limit no host
	// cgroup would enforce (rungv --limits best-effort); without it such
	// an episode is refused.
	BestEffort bool
}

// Config describes one episode. Its fields mean what the matching
// `docker run` options mean.
type Config struct {
	Platform    Platform
	NetworkMode NetworkMode
	// NetRaw allows raw sockets; AllowPacketSocketWrite writes on
	// AF_PACKET sockets; AllowSUID honours set-user-ID bits.
	NetRaw                 bool
	AllowPacketSocketWrite bool
	AllowSUID              bool

	// OCIImage names the image: oci:DIR[:REF], docker-archive:TAR, or a
	// path to either.
	OCIImage string
	// Entrypoint replaces the image's when EntrypointSet (empty clears
	// it; the image's Cmd is then dropped, as with docker run
	// --entrypoint).
	Entrypoint    []string
	EntrypointSet bool
	// Cmd replaces the image's Cmd when not empty.
	Cmd []string
	// Envv is KEY=VALUE pairs over the image's environment.
	Envv    []string
	Workdir string
	User    string // user[:group]

	Mounts    []Mount
	Resources Resources
	// Ports publishes guest TCP ports as host unix sockets (rungv -p
	// unix:HOSTSOCK:GUESTPORT), e.g. dockerd's 2375 for a docker client.
	Ports []Port

	// Egress is the NetModeNAT egress policy, rules as rungv run
	// --egress takes them: "allow=CIDR[:PORTS]" or "deny=CIDR[:PORTS]"
	// (package z.gfire.dev/gvx/runtime/egress; deny rules win). With
	// none the guest reaches the outside world only: never the host's
	// loopback, link-local addresses (cloud metadata), private ranges
	// or the host's own addresses. The same default as rungv run and
	// rungv pool.
	Egress []string
	// AllowHostPorts are the host's 127.0.0.1 ports the NetModeNAT guest
	// reaches as 10.0.2.2:PORT (rungv run --allow-host-port); none by
	// default.
	AllowHostPorts []int
	// NATMaxRelays bounds the TCP connections and UDP flows a NetModeNAT
	// guest holds at once (rungv run --nat-max-relays); 0 is rungv's
	// default (256).
	NATMaxRelays int

	// HostCPUs, when set, are the host CPUs the episode's processes (the
	// Sentry, its stubs, the gofer) may run on (rungv run --host-cpus);
	// the guest then sees that many CPUs (gVisor counts them when it
	// boots) unless Resources' CPUs says otherwise. One CPU per episode
	// costs far less CPU where cross-CPU wake-ups are dear
	// (docs/runtime.md); which episode gets which is the caller's (a
	// Pool gives every episode its Base's).
	HostCPUs []int

	// Stdin, Stdout and Stderr of the guest; nil means /dev/null.
	Stdin          io.Reader
	Stdout, Stderr io.Writer

	// Rungv is the rungv binary; "" means $GVX_RUNGV, then PATH.
	Rungv string
}

// Errors.
var (
	// ErrNoRungv reports that no rungv binary could be found.
	ErrNoRungv = errors.New("gvx: rungv binary not found (set Config.Rungv or GVX_RUNGV, or put rungv in PATH; build it with CGO_ENABLED=0 go build ./cmd/rungv)")
	// ErrClosed reports a Run on a closed Sandbox.
	ErrClosed = errors.New("gvx: sandbox is closed")
	// ErrRunning reports a second Run while one is in progress or done.
	ErrRunning = errors.New("gvx: sandbox already ran")
)

// Sandbox is one episode. Run it once, then Close it.
type Sandbox struct {
	bin  string
	spec *spec.Spec
	json []byte // spec, as rungv reads it from --spec-fd
	cfg  Config // HostCPUs, Stdin, Stdout, Stderr

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when rungv has been waited for
	started bool
	closed  bool

	ck *checkpointing // EnableCheckpoint's (fork.go); nil: none
	// ownSession starts rungv in a session of its own (setsid): its
	// autogroup, and a seccomp-only Sentry's, is then the episode's alone
	// (a warm boot's RefillNice, priority_linux.go).
	ownSession bool
}

// New validates cfg and prepares an episode: cfg.Spec(), run by rungv. ctx
// bounds nothing yet (the episode starts in Run); it is accepted so
// preparation can become cancellable without an API change.
func New(ctx context.Context, cfg Config) (*Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	bin, err := findRungv(cfg.Rungv)
	if err != nil {
		return nil, err
	}
	s, err := cfg.Spec()
	if err != nil {
		return nil, err
	}
	return newSandbox(bin, s, cfg)
}

// NewFromSpec prepares an episode of the whole spec s: every option rungv
// run has (a pull policy, the isolation mode, volume sizes, …), where
// Config holds the seeds' subset. proc says how rungv runs: only its
// Rungv, Stdin, Stdout and Stderr may be set.
func NewFromSpec(ctx context.Context, s *spec.Spec, proc Config) (*Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := onlyProcess(proc); err != nil {
		return nil, err
	}
	bin, err := findRungv(proc.Rungv)
	if err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("gvx: %w", err)
	}
	return newSandbox(bin, s.Clone(), proc)
}

func newSandbox(bin string, s *spec.Spec, proc Config) (*Sandbox, error) {
	b, err := s.Marshal()
	if err != nil {
		return nil, fmt.Errorf("gvx: %w", err)
	}
	return &Sandbox{bin: bin, spec: s, json: b, cfg: Config{HostCPUs: proc.HostCPUs, Stdin: proc.Stdin, Stdout: proc.Stdout, Stderr: proc.Stderr}}, nil
}

// runArgs is rungv's command line: the episode itself comes on fd 4.
// --stop-timeout 0: on Close's SIGTERM rungv kills the sandbox at once
// (the guest cannot delay it) and tears the episode down.
var runArgs = []string{"run", "--error-fd=3", "--spec-fd=4", "--stop-timeout=0"}

// CloseGrace bounds how long Close, and a Run whose context is cancelled,
// wait for rungv to tear the episode down after SIGTERM before they send
// SIGKILL. On SIGTERM rungv kills the sandbox at once and removes what the
// episode made on the host (its cgroups, state directory and published
// sockets) before it exits: a few milliseconds, well within the bound.
// What a SIGKILL leaves, rungv records before making it, and the next
// episode's start (or rungv gc) removes.
const CloseGrace = 2 * time.Second

// stopRungv sends p SIGTERM and, unless exited is closed within
// CloseGrace, SIGKILL.
func stopRungv(p *os.Process, exited <-chan struct{}) {
	_ = p.Signal(syscall.SIGTERM) // harmless if it already exited
	t := time.NewTimer(CloseGrace)
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C:
		_ = p.Kill()
	}
}

// Args returns the rungv command line the Sandbox runs (for logs); the
// episode is the Spec, which rungv reads from a pipe.
func (s *Sandbox) Args() []string {
	return append([]string{s.bin}, runArgs...)
}

// Spec returns (a copy of) the episode spec the Sandbox hands to rungv.
func (s *Sandbox) Spec() *spec.Spec { return s.spec.Clone() }

// Run runs the episode to its end and returns the guest's exit code (128+N
// if it was killed by signal N). Cancelling ctx kills the episode; Run
// then returns ctx.Err().
func (s *Sandbox) Run(ctx context.Context) (int, error) {
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return 0, ErrClosed
	case s.started:
		s.mu.Unlock()
		return 0, ErrRunning
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		s.mu.Unlock()
		return 0, err
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		errR.Close()
		errW.Close()
		s.mu.Unlock()
		return 0, err
	}
	args := append(append([]string{}, runArgs...), s.ck.args()...)
	if len(s.cfg.HostCPUs) > 0 {
		l := make([]string, len(s.cfg.HostCPUs))
		for i, c := range s.cfg.HostCPUs {
			l[i] = strconv.Itoa(c)
		}
		args = append(args, "--host-cpus="+strings.Join(l, ","))
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.cfg.Stdin, s.cfg.Stdout, s.cfg.Stderr
	// Not the caller's whole environment (its secrets): env.go.
	cmd.Env = rungvEnv(os.Environ())
	cmd.ExtraFiles = append([]*os.File{errW, specR}, s.ck.files()...) // fd 3, fd 4, fd 5...
	unpin := dieWithCaller(cmd)
	defer unpin()
	if s.ownSession {
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.Setsid = true
	}
	err = cmd.Start()
	errW.Close()
	specR.Close()
	s.ck.started()
	if err != nil {
		errR.Close()
		specW.Close()
		s.mu.Unlock()
		return 0, fmt.Errorf("gvx: start %s: %w", s.bin, err)
	}
	// The spec may be larger than a pipe holds: write it while rungv reads.
	// If rungv dies first the write fails, and rungv's own error says why.
	go func() {
		_, _ = specW.Write(s.json)
		specW.Close()
	}()
	s.cmd, s.started = cmd, true
	s.exited = make(chan struct{})
	s.mu.Unlock()
	defer close(s.exited)

	msgc := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(errR, 64<<10))
		errR.Close()
		msgc <- strings.TrimSpace(string(b))
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-done:
	case <-ctx.Done():
		stopped := make(chan struct{})
		go func() { <-done; close(stopped) }()
		stopRungv(cmd.Process, stopped) // rungv tears the episode down
		<-stopped
		<-msgc
		return 0, ctx.Err()
	}
	msg := <-msgc
	if msg != "" {
		return 0, fmt.Errorf("gvx: %s", msg)
	}
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) {
		return 0, fmt.Errorf("gvx: %w", werr)
	}
	if ee != nil && ee.ExitCode() < 0 {
		return 0, fmt.Errorf("gvx: rungv died: %v", ee)
	}
	return cmd.ProcessState.ExitCode(), nil
}

// Close kills the episode if it is still running and waits for it to go:
// rungv gets SIGTERM, on which it kills the sandbox and removes what the
// episode made on the host, and SIGKILL if it is not gone after
// CloseGrace.
// It is safe to call more than once and from another goroutine than Run.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	exited := s.exited
	cmd := s.cmd
	s.mu.Unlock()
	if cmd != nil {
		stopRungv(cmd.Process, exited)
	}
	if exited != nil {
		<-exited
	}
	return nil
}

// findRungv locates the rungv binary.
func findRungv(explicit string) (string, error) {
	for _, p := range []string{explicit, os.Getenv("GVX_RUNGV")} {
		if p != "" {
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("%w: %v", ErrNoRungv, err)
			}
			return p, nil
		}
	}
	p, err := exec.LookPath("rungv")
	if err != nil {
		return "", ErrNoRungv
	}
	return p, nil
}
