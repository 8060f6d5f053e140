// Package hostenv is the allow-list of the caller's environment that rungv
// and its host processes (the supervisor, init, runsc) get: nothing else of
// a caller's environment reaches them (a server's token, a cloud
// credential, a marker of the caller's own stays with the caller). The
// guest's environment is the spec's alone (the image's, Spec.Env), never
// the host's.
//
// Trust boundary: the caller's environment is the caller's; rungv's host
// processes read from it only the variables Names lists, and variables
// rungv sets for its own children (GVX_EPISODE and the like) are set by
// rungv, never taken from the caller.
package hostenv

import "strings"

// Names names the variables of the caller's environment that rungv, and
// through it the episode's supervisor and init, get. They are what rungv
// and the code it runs read:
//
//   - PATH, HOME, USER, LOGNAME, TMPDIR, TZ, LANG, LC_ALL: the process's
//     basics (TMPDIR holds rungv's per-episode state, HOME and
//     XDG_CACHE_HOME the default image cache of a non-root user).
//   - XDG_RUNTIME_DIR, XDG_CACHE_HOME, XDG_CONFIG_HOME.
//   - GVX_CACHE_DIR, GVX_CACHE (the image cache), GVX_NAT_DNS (the NAT
//     guest's DNS target), RUNGV_DEBUG_LOG (runsc's debug logs),
//     RUNGV_PROFILE_DIR (the Sentry's CPU profile).
//   - DOCKER_CONFIG, HTTP_PROXY, HTTPS_PROXY, NO_PROXY (and their lower
//     case forms), SSL_CERT_FILE, SSL_CERT_DIR: pulls from a registry.
//   - GOTRACEBACK, GODEBUG, GOGC, GOMEMLIMIT, GOMAXPROCS: the Go runtime.
var Names = []string{
	"PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "TZ", "LANG", "LC_ALL",
	"XDG_RUNTIME_DIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME",
	"GVX_CACHE_DIR", "GVX_CACHE", "GVX_NAT_DNS", "RUNGV_DEBUG_LOG", "RUNGV_PROFILE_DIR",
	"DOCKER_CONFIG", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
	"SSL_CERT_FILE", "SSL_CERT_DIR",
	"GOTRACEBACK", "GODEBUG", "GOGC", "GOMEMLIMIT", "GOMAXPROCS",
}

// Filter is of environ (KEY=VALUE, as os.Environ gives it) the variables
// Names and extra name, once each (the last, as exec.Cmd would take it),
// in environ's order. It is never nil: a nil exec.Cmd.Env would give the
// child the caller's whole environment.
func Filter(environ []string, extra ...string) []string {
	keep := make(map[string]bool, len(Names)+len(extra))
	for _, k := range Names {
		keep[k] = true
	}
	for _, k := range extra {
		keep[k] = true
	}
	last := map[string]int{}
	env := []string{}
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || !keep[k] {
			continue
		}
		if i, dup := last[k]; dup {
			env[i] = kv
			continue
		}
		last[k] = len(env)
		env = append(env, kv)
	}
	return env
}
