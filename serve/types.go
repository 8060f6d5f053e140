package serve

import (
	"errors"
	"time"

	"z.gfire.dev/gvx/spec"
)

// DefaultGoldenTarget is where an episode's clone of its golden volume is
// mounted unless CreateRequest.GoldenTarget says otherwise.
const DefaultGoldenTarget = "/var/lib/docker"

// DefaultDockerPort is the guest port published as the episode's Docker
// socket (dockerd -H tcp://0.0.0.0:2375, as docker:dind with
// DOCKER_TLS_CERTDIR= listens; a privileged episode's daemon service gets
// --tls=false then, agent.DaemonCommand).
const DefaultDockerPort = 2375

// CreateRequest is one episode to create (POST /v1/episodes).
type CreateRequest struct {
	// Spec is the episode (package z.gfire.dev/gvx/spec; Version 0 is
	// taken as spec.Version). Its Entrypoint and Args, if any, are the
	// episode's service — a background process such as dockerd, started
	// by the agent — not the episode's main process, which is the agent.
	// The image's own Entrypoint and Cmd are not run. The server adds its
	// mounts (the clone) and ports (the agent's, the Docker socket).
	Spec *spec.Spec `json:"spec"`
	// Golden, if set, is a golden ext4 volume file on the server's host:
	// the episode mounts a clone of it (reflink) at GoldenTarget.
	Golden       string `json:"golden,omitempty"`
	GoldenTarget string `json:"golden_target,omitempty"`
	// GoldenDurability is the clone's mount durability (spec
	// Mount.Durability): "" or "episode" (the default), a guest fsync
	// commits the volume's journal but skips the host flush (the clone
	// survives a killed episode, not a host crash; it is deleted at close
	// anyway); "full", it reaches the host's disk too. Needs Golden.
	GoldenDurability spec.Durability `json:"golden_durability,omitempty"`
	// Docker publishes the guest's DockerPort (0: DefaultDockerPort) as
	// the unix socket EpisodeInfo.DockerSocket (mode 0600).
	Docker     bool `json:"docker,omitempty"`
	DockerPort int  `json:"docker_port,omitempty"`
	// TTL is the episode's lifetime in seconds (0: the server's default;
	// at most its maximum).
	TTL float64 `json:"ttl,omitempty"`
	// Lease is in seconds: the episode is torn down once no request for
	// it has been in flight for that long (0: the server's default;
	// negative: no lease, TTL only). Renew it with POST
	// /v1/episodes/{id}/renew, or any request for the episode.
	Lease float64 `json:"lease,omitempty"`
	// Forkable starts the episode so that it can be forked once (POST
	// /v1/episodes/{id}/fork): it runs in spec.IsolationSeccompOnly (the
	// only mode with checkpoints; a namespaced spec is refused) and may
	// publish no ports of its own beyond the agent's and Docker's.
	Forkable bool `json:"forkable,omitempty"`
	// Wait says when the create answers: WaitAgent once the agent
	// answers; WaitDocker once the episode's Docker daemon answers GET
	// /info through DockerSocket too (what `docker info` asks). "" is
	// WaitDocker for a create with Docker and a service (Spec's
	// entrypoint), else WaitAgent. Both within the server's ready timeout.
	Wait string `json:"wait,omitempty"`
}

// CreateRequest.Wait's values.
const (
	WaitAgent  = "agent"
	WaitDocker = "docker"
)

// ForkRequest is POST /v1/episodes/{id}/fork's body: N new episodes that
// continue from the episode's current state (files, processes, memory).
type ForkRequest struct {
	N int `json:"n"`
	// TTL and Lease of the children, as in CreateRequest.
	TTL   float64 `json:"ttl,omitempty"`
	Lease float64 `json:"lease,omitempty"`
	// Forkable children can be forked in turn.
	Forkable bool `json:"forkable,omitempty"`
}

// ForkReply is a fork's answer: the children, running.
type ForkReply struct {
	Episodes []EpisodeInfo `json:"episodes"`
}

// Episode states.
const (
	StateStarting = "starting"
	StateRunning  = "running"
	StateClosing  = "closing"
)

// EpisodeInfo describes a live episode.
type EpisodeInfo struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Image string `json:"image"`
	// DockerSocket is the host path of the episode's Docker socket
	// (CreateRequest.Docker), for DOCKER_HOST=unix://….
	DockerSocket string `json:"docker_socket,omitempty"`
	// Volume is the host path of the clone of the golden volume.
	Volume      string    `json:"volume,omitempty"`
	CloneMethod string    `json:"clone_method,omitempty"`
	Created     time.Time `json:"created"`
	ExpiresAt   time.Time `json:"expires_at"`
	// LeaseSeconds is the lease (0: none); LeaseExpiresAt when it runs
	// out unless renewed (zero while a request is in flight).
	LeaseSeconds   float64   `json:"lease_seconds"`
	LeaseExpiresAt time.Time `json:"lease_expires_at,omitzero"`
	// ResetSeconds is the clone; ReadySeconds from the sandbox's start to
	// the agent answering.
	ResetSeconds float64 `json:"reset_seconds"`
	ReadySeconds float64 `json:"ready_seconds"`
	// Warm says the episode was booted ahead of demand (Config.Warm) and
	// its create claimed it; ClaimSeconds is that create's latency (the
	// reset and ready figures are then its boot's, before the claim).
	// IdleMemoryBytes is what a warm episode's processes held once ready
	// (PSS where readable, else RSS).
	Warm            bool    `json:"warm,omitempty"`
	ClaimSeconds    float64 `json:"claim_seconds,omitempty"`
	IdleMemoryBytes int64   `json:"idle_memory_bytes,omitempty"`
	// Forkable says a fork of the episode may be asked for (it was
	// created forkable and not forked yet); Parent is the episode a fork
	// child continues.
	Forkable bool   `json:"forkable,omitempty"`
	Parent   string `json:"parent,omitempty"`
	// Service is the state of the episode's service (CreateRequest.Spec's
	// entrypoint and args, dockerd say), when it has one. Its output is
	// GET /v1/episodes/{id}/service/log.
	Service *ServiceInfo `json:"service,omitempty"`
}

// Service states (ServiceInfo.State).
const (
	// ServiceStarting: the agent has not said yet that the service runs,
	// or the create waits for its Docker daemon to answer (WaitDocker).
	ServiceStarting = "starting"
	// ServiceRunning: it runs; nothing probes whether it is ready.
	ServiceRunning = "running"
	// ServiceReady: it runs and its Docker daemon answered GET /info.
	ServiceReady = "ready"
	// ServiceExited: it ended (ServiceInfo.ExitCode: its status, 128+N
	// for signal N).
	ServiceExited = "exited"
	// ServiceFailed: it could not be started (ServiceInfo.Error).
	ServiceFailed = "failed"
)

// ServiceInfo is how an episode's service is doing, as the in-guest agent
// that runs it reports (the guest's word) and the server's Docker probe.
type ServiceInfo struct {
	Argv     []string `json:"argv"`
	State    string   `json:"state"`
	ExitCode *int     `json:"exit_code,omitempty"`
	Error    string   `json:"error,omitempty"`
}

// Errors of the server, each with its HTTP status (errorStatus).
var (
	// ErrCapacity: MaxEpisodes are live (HTTP 429).
	ErrCapacity = errors.New("serve: episode cap reached")
	// ErrNotFound: no live episode has that ID (HTTP 404).
	ErrNotFound = errors.New("serve: no such episode")
	// ErrClosed: the server is shutting down (HTTP 503).
	ErrClosed = errors.New("serve: server is closed")
	// ErrBadRequest: the request is malformed (HTTP 400).
	ErrBadRequest = errors.New("serve: bad request")
	// ErrNotRunning: the episode is starting or closing (HTTP 409).
	ErrNotRunning = errors.New("serve: episode is not running")
	// ErrNotForkable: a fork of an episode not created forkable, or
	// forked already, or one whose save was refused before anything was
	// saved (a client still connected to its sockets: it runs on
	// unchanged and may be forked again) (HTTP 409).
	ErrNotForkable = errors.New("serve: episode is not forkable")
	// ErrImageNotFound: the create's image is neither where its reference
	// says nor in the image cache (HTTP 404).
	ErrImageNotFound = errors.New("serve: image not found")
)

// kindError is an error of one of the kinds above (its status) with a
// message of its own, without the kind's words.
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }
