package agent

import (
	"net"
	"strconv"
)

// DefaultPort is the guest TCP port the agent listens on (127.0.0.1 only)
// unless told otherwise.
const DefaultPort = 7299

// Limits of the protocol. Requests beyond them are refused with 413.
const (
	// MaxExecRequest bounds an ExecRequest's JSON (stdin included, as
	// base64).
	MaxExecRequest = 16 << 20
	// MaxFileBytes bounds one file written with PUT /file and each file
	// of an archive.
	MaxFileBytes = 8 << 30
	// MaxArchiveEntries bounds the entries of one PUT /archive.
	MaxArchiveEntries = 1 << 20
	// chunk is the most output bytes one Event carries.
	chunk = 64 << 10
)

// ExecRequest is one command to run in the guest: Argv, or Shell (run as
// /bin/sh -c Shell); exactly one of the two.
type ExecRequest struct {
	Argv  []string `json:"argv,omitempty"`
	Shell string   `json:"shell,omitempty"`
	// Env is KEY=VALUE pairs over the guest's environment.
	Env []string `json:"env,omitempty"`
	// Workdir is the command's directory ("": the agent's, the episode's
	// workdir).
	Workdir string `json:"workdir,omitempty"`
	// Timeout, in seconds, kills the command's process group when it
	// passes (0: none).
	Timeout float64 `json:"timeout,omitempty"`
	// Stdin is the command's standard input (JSON: base64); empty means
	// /dev/null.
	Stdin []byte `json:"stdin,omitempty"`
}

// Event types of an exec stream.
const (
	EventStdout = "stdout"
	EventStderr = "stderr"
	EventExit   = "exit"
	EventError  = "error"
)

// Event is one line of an exec stream: a chunk of output (Data, JSON
// base64), the exit (ExitCode: the status, 128+N for signal N; TimedOut
// when the timeout killed it), or an error (the command could not run, or
// the stream broke).
type Event struct {
	Type     string  `json:"type"`
	Data     []byte  `json:"data,omitempty"`
	ExitCode *int    `json:"exit_code,omitempty"`
	TimedOut bool    `json:"timed_out,omitempty"`
	Error    string  `json:"error,omitempty"`
	Seconds  float64 `json:"seconds,omitempty"` // the command's run time, on exit
}

// ServiceStatus says how the agent's service command is doing.
type ServiceStatus struct {
	Argv     []string `json:"argv,omitempty"`
	Running  bool     `json:"running"`
	ExitCode *int     `json:"exit_code,omitempty"`
	Error    string   `json:"error,omitempty"`
}

// Health is GET /health's answer.
type Health struct {
	OK      bool           `json:"ok"`
	Service *ServiceStatus `json:"service,omitempty"`
}

// ArchiveResult is PUT /archive's answer.
type ArchiveResult struct {
	Entries int   `json:"entries"`
	Bytes   int64 `json:"bytes"`
}

// Verb is the rungv binary's hidden verb that runs the agent
// (runtime/agent_linux.go dispatches it to Main).
const Verb = "_gvx-agent"

// GuestBinary is where a guest with published ports has the rungv binary
// (the relay image's mount, runtime/net/relayimage.go).
const GuestBinary = "/.gvx/rungv"

// Command is the episode command that runs the agent on port, with the
// service argv (may be empty) as its child.
func Command(port int, service []string) []string {
	return append([]string{GuestBinary, Verb, "--listen=" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), "--"}, service...)
}

// dindFlag marks the service as a privileged episode's (Main).
const dindFlag = "--dind"

// DaemonCommand is Command for a privileged episode: a Docker daemon
// service gets, in the guest, the flags the Sentry needs and --tls=false
// when its environment sets no TLS up (Main, --dind).
func DaemonCommand(port int, service []string) []string {
	return append([]string{GuestBinary, Verb, "--listen=" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dindFlag, "--"}, service...)
}
