// Package helper finds and runs gvx-vol-tools, the binary that holds every
// gvx-vol verb (the gvx-vol binary itself holds only the clone fast path,
// so that a clone does not pay for the other verbs' packages at start-up).
//
// The contract: gvx-vol-tools lies in the same directory as the running
// gvx-vol executable (os.Executable, symlinks resolved), as `go install
// z.gfire.dev/gvx/cmd/...` and `go build -o DIR/ ./cmd/gvx-vol/...` put
// it. Exec replaces the process with it (on Unix; elsewhere it runs it and
// exits with its status), passing the command line and environment
// unchanged, argv[0] included, so help and errors still say "gvx-vol". As
// git execs git-remote-https for its transports.
package helper

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// Name is the helper binary's file name (with ".exe" on Windows).
const Name = "gvx-vol-tools"

// Path returns where the helper must be: beside the running executable.
func Path() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("cannot find the running gvx-vol binary to look for %s beside it: %w", Name, err)
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	name := Name
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	return filepath.Join(filepath.Dir(exe), name), nil
}

// Exec runs the helper with args (args[0] is the program name) and does
// not return unless the helper cannot be started; the error then names
// the path it looked at and how to install the helper there.
func Exec(args []string) error {
	path, err := Path()
	if err != nil {
		return err
	}
	if err := execve(path, args); err != nil {
		return fmt.Errorf("this command needs the helper binary %s (gvx-vol itself runs only plain clone, info and ls command lines), which cannot run: %w\n"+
			"  install it beside gvx-vol: go build -o %s%c ./cmd/gvx-vol/... (builds both), or go install z.gfire.dev/gvx/cmd/...\n"+
			"  (go run builds gvx-vol alone: go run ./cmd/gvx-vol/gvx-vol-tools VERB… runs any verb)",
			path, err, filepath.Dir(path), filepath.Separator)
	}
	return nil
}
