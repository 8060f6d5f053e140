package volcmd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime/debug"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/overlay"
	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/hostdir"
)

// Create returns the create verb.
func Create() *cli.Command {
	return &cli.Command{
		Name:      "create",
		Usage:     "create a new ext4lite volume (a sparse file), optionally filled from a directory or tar",
		ArgsUsage: "[--size 8G] [--from DIR|TAR] FILE",
		Description: `Creates FILE holding a new ext4 filesystem with Debian mkfs.ext4's features
(64bit, extents, flex_bg, metadata_csum, dir_index, huge_file, dir_nlink,
extra_isize, has_journal), 4 KiB blocks and a journal. The file is sparse:
it takes only the space its metadata and data use. Linux mounts it
(mount -o loop,nosuid,nodev FILE DIR) and e2fsck -fn passes.

--from fills the volume from a host directory (owners, modes, xattrs incl.
trusted.*, devices, hard links, nanosecond times kept — run as root to keep
what only root may read or set) or from a tar archive (as gvx-vol import).
It fills a temporary file beside FILE without journal commits and renames
it to FILE when it is complete and durable: if the fill fails or the
process dies, FILE is not created, and a leftover .FILE.tmp-* is no volume.

Examples:
   gvx-vol create --size 32G golden-docker.ext4
   gvx-vol create --size 1G --from ./rootfs rootfs.ext4
   gvx-vol create --size 1G --from rootfs.tar.gz rootfs.ext4`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "size", Aliases: []string{"s"}, Value: "8G", Usage: "volume size (K, M, G, T suffixes; binary)"},
			&cli.StringFlag{Name: "from", Usage: "fill from this directory or tar archive (gzip/zstd detected)"},
			&cli.StringFlag{Name: "label", Usage: "volume label (up to 16 bytes)"},
			&cli.BoolFlag{Name: "force", Aliases: []string{"f"}, Usage: "replace FILE if it exists"},
			&cli.BoolFlag{Name: "json", Usage: "print the new volume's info as JSON"},
		},
		Action: oneThread(createAction),
	}
}

func createAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return cliutil.Usage(c, "want exactly one FILE")
	}
	path := c.Args().First()
	size, err := cliutil.ParseSize(c.String("size"))
	if err != nil {
		return cliutil.Usage(c, "--size: %v", err)
	}
	opts := &ext4lite.CreateOptions{Label: c.String("label"), Overwrite: c.Bool("force")}
	if from := c.String("from"); from != "" {
		// Filled as a temporary file and renamed when complete: no
		// journal commits while it fills, and no half volume at path.
		err = ext4lite.CreateFilled(path, size, opts, func(v *ext4lite.FS) error { return fill(v, from) })
	} else {
		var v *ext4lite.FS
		if v, err = ext4lite.Create(path, size, opts); err == nil {
			err = v.Close()
		}
	}
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w (use --force to replace it)", err)
		}
		return err
	}
	// Info of the closed, clean volume (an open one reads "in use").
	r, err := openVolume(path, true)
	if err != nil {
		return err
	}
	info, err := r.Info()
	r.Close()
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return cliutil.PrintJSON(c.App.Writer, info)
	}
	fmt.Fprintf(c.App.Writer, "created %s: %s, %d blocks of %d bytes, %d inodes\n",
		path, cliutil.FormatSize(int64(info.Blocks)*int64(info.BlockSize)), info.Blocks, info.BlockSize, info.Inodes)
	return nil
}

// fill copies a directory or a tar archive into v.
func fill(v *ext4lite.FS, from string) error {
	fi, err := os.Stat(from)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		if err := sink.Copy(v, hostdir.New(from)); err != nil {
			return fmt.Errorf("copying %s: %w", from, err)
		}
		return nil
	}
	r, size, err := inputStream(from)
	if err != nil {
		return err
	}
	defer r.Close()
	return importTar(v, ".", r, size, from)
}

// importGCPercent is the collector's target while a tar is imported. The
// walk allocates per entry (archive/tar's headers and PAX maps, inodes)
// but keeps little alive (some 60 MiB of staged metadata on
// bench/import.sh's 68,000-entry tree), so at Go's default of 100 it
// collects 16 times per import; at 400 a quarter as often, for some 7% of
// the import's CPU (docs/ext4lite.md) and a peak RSS of ~200 MiB instead
// of ~130 MiB. GOGC in the environment overrides it.
const importGCPercent = 400

// importTar runs overlay.ImportTar with a progress bar on terminals.
func importTar(dst sink.Sink, dest string, r interface{ Read([]byte) (int, error) }, size int64, name string) error {
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(importGCPercent))
	}
	rd := withProgress(r, size, "importing "+name)
	if err := overlay.ImportTar(dst, rd, overlay.ImportOptions{Dest: dest}); err != nil {
		return fmt.Errorf("importing %s: %w", name, err)
	}
	return finishProgress(rd)
}
