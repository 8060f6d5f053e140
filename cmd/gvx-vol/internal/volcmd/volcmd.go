// Package volcmd holds gvx-vol's volume verbs: create, import, export, ls,
// cat, info, fsck and compact. Each file is one verb; all logic lives in
// ext4lite and overlay — these parse flags, call the library and print.
package volcmd

import (
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"z.gfire.dev/gvx/ext4lite"
)

// Create, Import, Export, Ls, Cat, Info, Fsck and Compact (one file each)
// return the volume verbs, each a top-level gvx-vol command, a new one at
// each call (urfave/cli's setup changes a command in place).

// oneThread runs a verb that writes a volume on one OS thread: its write
// order is deterministic, and per-thread tools (strace's fault injection
// counts per thread) can target the Nth write of a run. The read-only
// verbs and clone do without: a locked thread costs a start-up a thread
// creation more.
func oneThread(action cli.ActionFunc) cli.ActionFunc {
	return func(c *cli.Context) error {
		runtime.LockOSThread()
		return action(c)
	}
}

// closeVolume closes v and joins the error with err.
func closeVolume(v *ext4lite.FS, err error) error {
	if cerr := v.Close(); err == nil && cerr != nil {
		return fmt.Errorf("writing volume: %w", cerr)
	}
	return err
}

// inputStream opens a path or "-" for stdin and reports its size when known.
func inputStream(name string) (io.ReadCloser, int64, error) {
	if name == "-" {
		return io.NopCloser(os.Stdin), -1, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

// stderrIsTerminal tells whether progress bars may be drawn.
func stderrIsTerminal() bool { return term.IsTerminal(int(os.Stderr.Fd())) }
