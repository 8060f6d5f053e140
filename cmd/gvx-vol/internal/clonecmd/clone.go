// Package clonecmd is gvx-vol's clone verb for the full CLI (urfave/cli, in
// gvx-vol-tools): O(1) copy-on-write clones of golden volumes (an episode's
// reset), one at a time or many at once. Its help text lives here; its
// flags and its run live in package clonecore, which the gvx-vol binary's
// fast path calls without urfave/cli. All clone logic is in package
// reflink.
package clonecmd

import (
	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/cmd/gvx-vol/internal/clonecore"
)

// Commands returns the clone verb.
func Commands() []*cli.Command { return []*cli.Command{command()} }

func command() *cli.Command {
	return &cli.Command{
		Name:      "clone",
		Usage:     "clone a golden volume copy-on-write (an episode's reset), once or N times",
		ArgsUsage: clonecore.ArgsUsage,
		Description: `Makes DST a reflink clone of SRC: DST shares SRC's blocks until either is
written, so a clone of a 16 GiB volume takes a few milliseconds and no
space; only the 4 KiB blocks an episode changes cost space. This is
cp --reflink=always, as a library call the runtime and SDK also use.

Cloning needs a filesystem that can: XFS made with -m reflink=1 (the default
since xfsprogs 5.1), Btrfs, bcachefs, APFS (macOS), ReFS or Dev Drive
(Windows). SRC and DST must be on the same one. On any other filesystem the
default --reflink=always fails and says so; --reflink=auto then makes a
sparse copy instead (slow: it copies the data, but keeps holes as holes).

DST is written under a temporary name, fsynced and renamed into place: it is
never seen half-made. The fsyncs are most of a clone's ~1 ms; --no-sync skips
them for scratch volumes a crash may lose (never for golden volumes). An existing DST is kept unless --force. If DST is a
directory the clone goes into it under SRC's name.

With --count N, DST is a pattern with one integer verb (%d, %04d…) and gvx-vol
makes N clones numbered --start, --start+1, … (default 0..N-1), stopping at
the first error.

Examples:
   # reset episode 42 from the golden volume
   gvx-vol clone --force golden-docker.ext4 /var/lib/gvx/ep-0042.ext4

   # prepare 64 episodes, ep-0000.ext4 … ep-0063.ext4, and show timings as JSON
   gvx-vol clone --count 64 --json golden-docker.ext4 /var/lib/gvx/ep-%04d.ext4

   # episodes 64..127 next to them
   gvx-vol clone --count 64 --start 64 golden-docker.ext4 /var/lib/gvx/ep-%04d.ext4

   # on a filesystem that cannot clone (ext4, tmpfs): copy sparsely instead
   gvx-vol clone --reflink=auto golden-docker.ext4 /tmp/ep-0000.ext4

   # can this directory clone? (exit status 1 if not)
   gvx-vol clone --probe /var/lib/gvx`,
		Flags:  cliutil.Flags(clonecore.Flags),
		Action: cliutil.Action(clonecore.Run),
	}
}
