package gvx

import "z.gfire.dev/gvx/internal/hostenv"

// rungvEnv is rungv's environment: of environ (KEY=VALUE, as os.Environ
// gives it), the variables hostenv.Names names, once each (the last, as
// exec.Cmd would take it); nothing else of the caller's environment
// reaches rungv, its supervisor and init. The guest's environment is the
// spec's alone.
func rungvEnv(environ []string) []string { return hostenv.Filter(environ) }
