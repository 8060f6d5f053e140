package volcmd

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/internal/termsafe"
	"z.gfire.dev/gvx/overlay"
)

// Export returns the export verb.
func Export() *cli.Command {
	return &cli.Command{
		Name:      "export",
		Usage:     "write a volume's tree (or a part) as a tar archive",
		ArgsUsage: "[--path PATH] FILE TAR|-",
		Description: `Writes the tree under PATH (default the root) of the volume FILE as a PAX tar
archive to TAR, or standard output for -. Lossless: xattrs (SCHILY.xattr.*),
nanosecond times, owners, modes, devices, fifos, sockets are skipped with a
warning only where tar has no form for them, and hard links stay links.
The volume is opened read-only. An entry whose path is longer than
--max-path bytes (4096, Linux's PATH_MAX) is left out with its subtree and
a warning: tar spells out every path, so a tree nested thousands deep (a
guest can make one) would make an archive the square of its depth. Each
directory is exported once: a second name for one (a hard link to a
directory, which only a crafted or corrupt volume has: debugfs's link can
make a/b/up the directory a, so a/b/up/b/up/... never ends) is left out
with its subtree and a warning; gvx-vol fsck reports such links.

Examples:
   gvx-vol export vol.ext4 - | tar -tvf -
   gvx-vol export --path /var/lib/docker/image golden.ext4 image-meta.tar`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "path", Value: "/", Usage: "directory of the volume to export"},
			&cli.IntFlag{Name: "max-path", Value: overlay.DefaultMaxPath, Usage: "leave out entries whose path is longer than `BYTES` (-1: none)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return cliutil.Usage(c, "want FILE and TAR (or - for standard output)")
			}
			v, err := openVolume(c.Args().Get(0), true)
			if err != nil {
				return err
			}
			defer v.Close()
			tree, err := v.Sub(ext4lite.CleanPath(c.String("path")))
			if err != nil {
				return err
			}
			var w io.Writer = c.App.Writer
			var f *os.File
			if out := c.Args().Get(1); out != "-" {
				f, err = os.Create(out)
				if err != nil {
					return err
				}
				w = f
			}
			bw := bufio.NewWriterSize(w, 1<<20)
			// A guest can make a socket file (mknod S_IFSOCK): left out
			// with a warning, as the help says, not an export that fails.
			maxPath := c.Int("max-path")
			if maxPath == 0 {
				return cliutil.Usage(c, "--max-path 0: want a length in bytes, or -1 for none")
			}
			err = overlay.ExportTar(bw, tree, overlay.ExportOptions{SkipSockets: true, Skipped: func(p string) {
				fmt.Fprintf(c.App.ErrWriter, "gvx-vol export: left out the socket %s: tar has no form for it\n", termsafe.String(p))
			}, MaxPath: maxPath, TooLong: func(p string) {
				fmt.Fprintf(c.App.ErrWriter, "gvx-vol export: left out %s… and everything below it: its path is %d bytes, over --max-path %d\n", termsafe.String(p[:min(len(p), 120)]), len(p), maxPath)
			}, Linked: func(p, first string) {
				was := "the root directory"
				if first != "." {
					was = "the directory " + termsafe.String(first[:min(len(first), 400)])
				}
				fmt.Fprintf(c.App.ErrWriter, "gvx-vol export: left out %s and everything below it: it is %s again, "+
					"a hard link to a directory (a cycle or a shared subtree) that only a crafted or corrupt volume has; gvx-vol fsck reports it\n",
					termsafe.String(p[:min(len(p), 400)]), was)
			}})
			if err == nil {
				err = bw.Flush()
			}
			if f != nil {
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				return fmt.Errorf("exporting: %w", err)
			}
			return nil
		},
	}
}
