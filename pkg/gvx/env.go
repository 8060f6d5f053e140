package gvx

import "strings"

// rungvEnvNames names the variables of the caller's environment that rungv,
// and through it the episode's supervisor and init, get; nothing else of
// the caller's environment reaches them (a server's token, a cloud
// credential, a marker of the caller's own stays with the caller). The
// guest's environment is the spec's alone (the image's, Spec.Env), never
// the host's. They are what rungv and the code it runs read:
//
//   - PATH, HOME, USER, LOGNAME, TMPDIR, TZ, LANG, LC_ALL: the process's
//     basics (TMPDIR holds rungv's per-episode state, HOME and
//     XDG_CACHE_HOME the default image cache of a non-root user).
//   - XDG_RUNTIME_DIR, XDG_CACHE_HOME, XDG_CONFIG_HOME.
//   - GVX_CACHE_DIR, GVX_CACHE (the image cache), GVX_NAT_DNS (the NAT
//     guest's DNS target), RUNGV_DEBUG_LOG (runsc's debug logs).
//   - DOCKER_CONFIG, HTTP_PROXY, HTTPS_PROXY, NO_PROXY (and their lower
//     case forms), SSL_CERT_FILE, SSL_CERT_DIR: pulls from a registry.
//   - GOTRACEBACK, GODEBUG, GOGC, GOMEMLIMIT, GOMAXPROCS: the Go runtime.
var rungvEnvNames = []string{
	"PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "TZ", "LANG", "LC_ALL",
	"XDG_RUNTIME_DIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME",
	"GVX_CACHE_DIR", "GVX_CACHE", "GVX_NAT_DNS", "RUNGV_DEBUG_LOG",
	"DOCKER_CONFIG", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
	"SSL_CERT_FILE", "SSL_CERT_DIR",
	"GOTRACEBACK", "GODEBUG", "GOGC", "GOMEMLIMIT", "GOMAXPROCS",
}

// rungvEnv is rungv's environment: of environ (KEY=VALUE, as os.Environ
// gives it), the variables rungvEnvNames names, once each (the last, as
// exec.Cmd would take it).
func rungvEnv(environ []string) []string {
	keep := make(map[string]bool, len(rungvEnvNames))
	for _, k := range rungvEnvNames {
		keep[k] = true
	}
	last := map[string]int{}
	var env []string
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
	if env == nil {
		env = []string{} // not nil: exec.Cmd would give rungv the caller's
	}
	return env
}
