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
// The package is gVisor-free (gvx-vol imports it and must not link the
// runtime).
package dind
