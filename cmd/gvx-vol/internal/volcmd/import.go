package volcmd

import (
	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/ext4lite"
)

// Import returns the import verb.
func Import() *cli.Command {
	return &cli.Command{
		Name:      "import",
		Usage:     "unpack a tar archive into a volume",
		ArgsUsage: "[--dest PATH] FILE TAR|-",
		Description: `Unpacks TAR (or standard input for -) into the volume FILE, under PATH
(default the root; missing directories are created). gzip and zstd archives
are detected. Kept: PAX xattrs (SCHILY.xattr.*, incl. trusted.* and
security.*), hard links, char/block devices, fifos, GNU and PAX sparse files
(holes stay holes), nanosecond times, owners and modes. A later entry
replaces an earlier one at the same path.

Refused, naming the entry: names with "..", writes through a symlink, hard
links to entries not in the volume, truncated archives. What was imported
before the bad entry stays, and the volume stays consistent.

Examples:
   gvx-vol import vol.ext4 rootfs.tar
   docker save busybox | gvx-vol import --dest /images/busybox vol.ext4 -
   tar -C dir --xattrs -cf - . | gvx-vol import vol.ext4 -`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dest", Value: "/", Usage: "directory in the volume to unpack into"},
		},
		Action: oneThread(func(c *cli.Context) error {
			if c.NArg() != 2 {
				return cliutil.Usage(c, "want FILE and TAR (or - for standard input)")
			}
			v, err := openVolume(c.Args().Get(0), false)
			if err != nil {
				return err
			}
			r, size, err := inputStream(c.Args().Get(1))
			if err != nil {
				return closeVolume(v, err)
			}
			defer r.Close()
			return closeVolume(v, importTar(v, ext4lite.CleanPath(c.String("dest")), r, size, c.Args().Get(1)))
		}),
	}
}
