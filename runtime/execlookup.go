package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"z.gfire.dev/gvx/sink"
)

// ExecNotFoundError is a guest command the image does not have: rungv
// says so in Docker's words and exits 127, as `docker run IMAGE nope`
// does, before anything boots (the Sentry's own refusal, "error finding
// executable", came with runsc's internals around it and exit 125).
type ExecNotFoundError struct {
	Name   string // the command as given (args[0])
	InPATH bool   // searched in $PATH (no slash in Name)
	Path   string // the path looked up, when Name has a slash
}

func (e *ExecNotFoundError) Error() string {
	if e.InPATH {
		return fmt.Sprintf("exec: %q: executable file not found in $PATH", e.Name)
	}
	return fmt.Sprintf("exec: %q: stat %s: no such file or directory", e.Name, e.Path)
}

// ExitCode is the status a shell and Docker give a command not found.
func (e *ExecNotFoundError) ExitCode() int { return 127 }

// maxExecHops bounds the symlinks followed while looking a command up
// (Linux's MAXSYMLINKS).
const maxExecHops = 40

// lookupExec reports a *ExecNotFoundError when the image src certainly
// lacks the guest's command name (resolved as execve and a shell's PATH
// search would: name with a slash against cwd, else each $PATH directory
// of env; symlinks followed inside the image). Only a certain miss is an
// error: a path that any mount or file added at start (shadowed) covers,
// an image that cannot be read, or a $PATH that is unset or relative
// leave the decision to the Sentry.
func lookupExec(src sink.Source, name string, env []string, cwd string, shadowed func(string) bool) error {
	if src == nil || name == "" {
		return nil
	}
	if strings.Contains(name, "/") {
		p := name
		if !path.IsAbs(p) {
			p = path.Join(cwd, p)
		}
		if imageHas(src, path.Clean(p), shadowed) {
			return nil
		}
		return &ExecNotFoundError{Name: name, Path: p}
	}
	pathVar, ok := "", false
	for _, kv := range env {
		if v, found := strings.CutPrefix(kv, "PATH="); found {
			pathVar, ok = v, true
		}
	}
	if !ok {
		return nil
	}
	for _, dir := range strings.Split(pathVar, ":") {
		if !path.IsAbs(dir) {
			return nil // "" or relative: the working directory, at run time
		}
		if imageHas(src, path.Join(dir, name), shadowed) {
			return nil
		}
	}
	return &ExecNotFoundError{Name: name, InPATH: true}
}

// imageHas reports whether the absolute path p may name a file when the
// guest starts: false only if the image certainly has none there.
func imageHas(src sink.Source, p string, shadowed func(string) bool) bool {
	rest := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur := "/"
	for hops := 0; len(rest) > 0; {
		comp := rest[0]
		rest = rest[1:]
		switch comp {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, comp)
		if shadowed(next) {
			return true
		}
		h, err := src.Lstat(strings.TrimPrefix(next, "/"))
		if errors.Is(err, fs.ErrNotExist) {
			return false
		}
		if err != nil {
			return true // unreadable: not ours to judge
		}
		switch h.Type() {
		case sink.TypeSymlink:
			if hops++; hops > maxExecHops {
				return true // ELOOP is the Sentry's to report
			}
			target := strings.Split(h.Linkname, "/")
			if path.IsAbs(h.Linkname) {
				cur = "/"
			}
			rest = append(target, rest...)
		case sink.TypeDir:
			cur = next
		default:
			if len(rest) > 0 {
				return false // a file is no directory
			}
			return true
		}
	}
	return true // a directory: execve's EACCES is the Sentry's to report
}
