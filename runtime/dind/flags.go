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
