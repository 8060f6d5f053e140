// Package serve is the episode server behind `rungv serve`: one
// long-lived, unprivileged process per node that owns episodes and offers
// them over an HTTP+JSON API (docs/api.md, docs/openapi.yaml) to clients
// such as the Python package in clients/python.
//
// What it promises:
//
//   - Create clones a golden ext4 volume (reflink, package reflink) into
//     the episode's directory, runs the episode through the Go SDK
//     (gvx.NewFromSpec, so rungv dies with the server: Pdeathsig) with the
//     in-guest agent (package z.gfire.dev/gvx/agent) as its command, publishes the
//     agent's guest port and, on request, the Docker port (2375) as unix
//     sockets in that directory, and returns once the agent answers.
//   - Exec, files and archives are forwarded to the agent, streamed both
//     ways; exec answers NDJSON events ending in the exit code.
//   - A hard cap on live episodes (MaxEpisodes, starting ones included):
//     beyond it Create fails with ErrCapacity, HTTP 429 with Retry-After.
//   - Every episode is torn down — rungv killed and waited for, its
//     directory (clone, sockets, record) removed — on Delete, when its TTL
//     passes, when its lease runs out (no request for it in flight for
//     Lease: its client is gone), when it exits by itself, and on Close.
//     A lease is the client's session: any request renews it, POST
//     …/renew renews it explicitly, an in-flight request holds it.
//   - New holds StateDir's lock for the server's life and first reaps what
//     a dead (SIGKILLed) predecessor left there: each episode's record
//     names its rungv process (PID, start time, executable); a survivor
//     that still runs rungv is killed through a pidfd, then the directory
//     is removed.
//   - StateDir and its episode directories are checked, never assumed
//     (internal/privdir): opened without following a symlink, they must be
//     the server's user's and writable by no one else (DefaultStateDir's
//     $TMPDIR fallback: mode 0700 exactly). Another local user who made
//     them first gets a refusal that names the directory, its owner and
//     mode, not the server's records and sockets.
//   - An episode whose create sets no memory limit gets DefaultMemory
//     (4 GiB), and its processes get an environment of what they need,
//     never the server's (its token): package gvx builds rungv's.
//   - The clients' connections are bounded (conn.go): headers, idleness,
//     a stalled body or answer, and MaxConns open at once per listener; a
//     request without the token is answered 401 and its connection closed.
//
// Trust boundary: the API's client is trusted as the server's own user
// (it names host paths: images, golden volumes, mounts), like a Docker
// socket's client; the unix socket is mode 0600 and a TCP listener needs a
// bearer token. The guest, and so the agent, is hostile: its answers are
// streamed back without being interpreted, nothing of the client's
// request headers (the token) is forwarded to it, and it reaches nothing
// on the host but its own published sockets.
//
// Files: config.go (Config and defaults), types.go (the API's values and
// errors), server.go (the episode table, cap, reaper), episode.go
// (create, start, teardown), state.go and reap_linux.go (records and
// reaping), api.go (the HTTP handlers), proxy.go (forwarding to the
// agent), listen.go (unix and TCP listeners), conn.go (the connections'
// bounds), metrics.go (Prometheus text).
package serve
