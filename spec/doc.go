// Package spec is the episode spec: one typed, JSON-serialisable value that
// says everything about an episode — its image, command, environment,
// mounts, published ports, network and egress policy, limits, privileges,
// isolation mode and lockdown — and that crosses every process boundary
// as it is, never turned into a command line and parsed back.
//
// Its writers and readers:
//
//   - the Go SDK (z.gfire.dev/gvx/pkg/gvx) builds a Spec from the seeds'
//     gvx.Config and hands it to `rungv run --spec-fd N` over a pipe;
//   - `rungv run` builds the same Spec from its flags, or reads a whole one
//     with --spec FILE (docs/runtime.md, "The episode spec");
//   - `rungv pool` builds it from the same flags, with the same names,
//     defaults and parsing, and runs every episode of the pool from it;
//   - the runtime runs it as it is (runtime.Run takes the Spec and a
//     runtime.Host: what runs it on this host, not what it is).
//
// The package is plain data and rules: it imports no gVisor and builds for
// every GOOS.
//
// # Contract
//
// A Spec is valid when Validate returns nil; Validate is the one place the
// rules live, and each problem it reports is a *FieldError naming the JSON
// path of its field ("mounts[0].target"). Every field's zero value is its
// default (the conservative one: no network, not privileged, the runtime's
// limits), except Version (always Version, 1) and Image (required). Host
// paths (volume files, bind sources, published sockets) are absolute, so a
// spec means the same whatever directory its reader runs in.
//
// # Trust boundary
//
// A spec comes from the caller (a file it wrote, the SDK's pipe), not from
// the guest, but it is still parsed as bytes that may be wrong: Parse
// refuses more than MaxSize bytes, an unknown or missing version, unknown
// fields at any depth, values of the wrong type and trailing data, with an
// error that names the field and unwraps to ErrInvalid; it never panics.
// What a valid spec asks for (a bind mount of a host directory, a host
// port the guest may reach) is granted: the spec is the caller's word.
//
// # JSON
//
// Field names are snake_case; absent fields take their defaults. An
// episode that runs docker:dind with /var/lib/docker on a volume, its
// daemon's socket published, 4 GiB and 2 CPUs:
//
//	{
//	  "version": 1,
//	  "image": "docker:dind",
//	  "pull": "never",
//	  "entrypoint": ["sh", "-c"],
//	  "args": ["dockerd-entrypoint.sh --tls=false"],
//	  "env": ["DOCKER_TLS_CERTDIR="],
//	  "mounts": [
//	    {"type": "volume", "source": "/srv/rl-episodes/ep-0042.ext4",
//	     "target": "/var/lib/docker", "size": 34359738368},
//	    {"type": "tmpfs", "target": "/tmp"}
//	  ],
//	  "ports": [{"host_socket": "/srv/rl-episodes/ep-0042.sock", "guest_port": 2375}],
//	  "network": "nat",
//	  "egress": ["allow=10.1.2.3:443"],
//	  "allow_host_ports": [5000],
//	  "limits": {"memory_bytes": 4294967296, "cpus": 2, "pids": 4096, "policy": "strict"},
//	  "privileged": true,
//	  "isolation": "auto"
//	}
//
// "entrypoint" absent (or null) keeps the image's; [] clears it. The other
// fields: "workdir", "user", "nat_max_relays", "net_raw",
// "allow_packet_socket_write", "allow_suid", "platform" (systrap, ptrace,
// kvm), "lockdown" (full, off); a mount's "readonly", "max_open",
// "durability" (full, episode) and "allow_foreign"; a port's
// "host_addr" ("127.0.0.1:8080") in place of "host_socket".
//
// # Versions
//
// "version" is 1. A change that a version-1 reader would misread (a new
// field, a new meaning) makes version 2; readers refuse versions they do
// not know rather than guess.
package spec
