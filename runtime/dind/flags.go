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

// Args returns args with Flags appended when args is a daemon command
// (IsDaemonCommand) followed by nothing but dockerd flags, as docker:dind
// and its derivatives are run; each flag of Flags the caller already gave
// (--iptables, --iptables=…) is kept as given. Any other command (the
// entrypoint running another program, a shell) is returned unchanged.
// args itself is never modified.
func Args(args []string) []string {
	if len(args) == 0 || !IsDaemonCommand(args[0]) {
		return args
	}
	for _, a := range args[1:] {
		if !strings.HasPrefix(a, "-") {
			return args // the entrypoint runs another command
		}
	}
	out := append([]string{}, args...)
	for _, f := range Flags {
		name, _, _ := strings.Cut(f, "=")
		given := false
		for _, a := range args[1:] {
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
