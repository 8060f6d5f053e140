package dind

import (
	"path"
	"strings"
)

// Flags are the dockerd flags every daemon in the Sentry needs (see the
// package doc). Callers must not modify the slice.
var Flags = []string{"--iptables=false", "--ip6tables=false"}

// IsDaemonCommand reports whether arg0 starts a Docker daemon the way
// docker:dind does: dockerd-entrypoint.sh or dockerd, by any path.
func IsDaemonCommand(arg0 string) bool {
	b := path.Base(arg0)
	return b == "dockerd-entrypoint.sh" || b == "dockerd"
}

// Args returns args with Flags appended (AddFlags) when args is a daemon
// command (IsDaemonCommand) followed by nothing but words that start with
// "-", as docker:dind and its derivatives are run. Any other command (the
// entrypoint running another program, a shell, a flag with a separate
// value such as -H fd://, which cannot be told from a program) is
// returned unchanged. args itself is never modified.
func Args(args []string) []string {
	if !IsDaemon(args) {
		return args
	}
	return append([]string{args[0]}, AddFlags(args[1:])...)
}

// IsDaemon reports whether args (a command line) starts a Docker daemon
// as docker:dind is run: a daemon command (IsDaemonCommand) followed by
// nothing but words that start with "-".
func IsDaemon(args []string) bool {
	if len(args) == 0 || !IsDaemonCommand(args[0]) {
		return false
	}
	for _, a := range args[1:] {
		if !strings.HasPrefix(a, "-") {
			return false // the entrypoint runs another command
		}
	}
	return true
}

// AddFlags returns dockerd's flags with each of Flags appended that they
// do not already set (--iptables, --iptables=… as given win), for a caller
// that knows flags are dockerd's. flags itself is never modified.
func AddFlags(flags []string) []string {
	out := append([]string{}, flags...)
	for _, f := range Flags {
		name, _, _ := strings.Cut(f, "=")
		given := false
		for _, a := range flags {
			if a == name || strings.HasPrefix(a, name+"=") {
				given = true
			}
		}
		if !given {
			out = append(out, f)
		}
	}
	return out
}

// NoTLS is the flag that tells dockerd its plain-TCP listener is meant:
// without it, dockerd (since Docker 20.10) that listens on TCP with no TLS
// warns and sleeps 15 s before it serves — docker:dind run with
// DOCKER_TLS_CERTDIR= listens on tcp://0.0.0.0:2375 that way. In an
// episode that listener is the Sentry's, reached from the host only
// through the socket rungv publishes for it (-p unix:…, serve's docker
// socket), so the wait buys nothing.
const NoTLS = "--tls=false"

// tlsEnv are the environment variables that give dockerd or
// docker:dind's entrypoint TLS material (a certificate directory, or
// verification asked for).
var tlsEnv = []string{"DOCKER_TLS_CERTDIR", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"}

// WantsNoTLS reports whether a daemon started with flags (dockerd's or its
// entrypoint's), in environment env (KEY=VALUE, later entries win) and
// with daemonJSON (/etc/docker/daemon.json's contents, nil when there is
// none) should get NoTLS: nothing sets TLS up — no --tls… flag (--tls,
// --tlsverify, --tlscert…), no --config-file (which may), none of
// DOCKER_TLS_CERTDIR, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH non-empty, no
// "tls" in daemon.json (dockerd refuses a directive given both as a flag
// and in the file).
func WantsNoTLS(flags, env []string, daemonJSON []byte) bool {
	for _, a := range flags {
		if strings.HasPrefix(a, "--tls") || strings.HasPrefix(a, "-tls") || strings.HasPrefix(a, "--config-file") {
			return false
		}
	}
	vals := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vals[k] = v
	}
	for _, k := range tlsEnv {
		if vals[k] != "" {
			return false
		}
	}
	return !strings.Contains(string(daemonJSON), "tls")
}

// ArgsEnv is Args for a daemon whose environment (env) and daemon.json
// (daemonJSON, nil when none) are known: a daemon command line
// (IsDaemon) also gets NoTLS when nothing sets TLS up (WantsNoTLS). Any
// other command is returned unchanged; args is never modified.
func ArgsEnv(args, env []string, daemonJSON []byte) []string {
	if !IsDaemon(args) {
		return args
	}
	out := Args(args)
	if WantsNoTLS(args[1:], env, daemonJSON) {
		out = append(out, NoTLS)
	}
	return out
}
