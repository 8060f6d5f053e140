// Package dind knows what a Docker daemon needs to run inside gVisor's
// Sentry, for every caller that starts one: rungv run (package runtime adds
// Flags to a docker:dind-style command) and the golden-volume build
// (package golden starts the daemon image's own entrypoint with them).
//
// The Sentry's netstack has no MASQUERADE target: dockerd that programs
// iptables exits with "Unable to enable NAT rule … MASQUERADE revision 0
// not supported", even with legacy iptables. With --iptables=false
// --ip6tables=false it starts, and the default bridge still works for
// containers, without NAT to the outside.
//
// A daemon that listens on TCP with no TLS (docker:dind with
// DOCKER_TLS_CERTDIR=, tcp://0.0.0.0:2375) sleeps 15 s before it serves
// unless told --tls=false. Every caller that starts a daemon command line
// with a known environment (ArgsEnv: rungv run and the SDK through package
// runtime, serve's agent for a `docker: true` episode's service, rungv's
// dockerd shim for a daemon a script starts) adds NoTLS when nothing sets
// TLS up (WantsNoTLS), so no recipe waits for it.
//
// The package is gVisor-free (gvx-vol imports it and must not link the
// runtime).
package dind
