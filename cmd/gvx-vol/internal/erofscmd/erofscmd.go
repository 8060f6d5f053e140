// Package erofscmd is gvx-vol's erofs command group: build an EROFS image
// from a host directory or a tar archive, and list or print what an image
// holds. All format logic is in package erofs; the tree walks are
// erofs.Builder.AddDir (parallel, no spool) and overlay.ImportTar.
package erofscmd

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/erofs"
)

// Command returns the erofs command group, a new one at each call
// (urfave/cli's setup changes a command in place).
func Command() *cli.Command {
	return &cli.Command{
		Name:  "erofs",
		Usage: "build and inspect EROFS images (the read-only base images episodes boot from)",
		Description: `EROFS images hold the base images every episode boots from: read-only,
shared through the host page cache, mounted natively by gVisor's Sentry and
by Linux. gvx-vol writes them itself (no mkfs.erofs needed), byte-for-byte
deterministic, and reads them back without mounting anything.

Examples:
   gvx-vol erofs build --profile runtime ./rootfs rootfs.erofs
   gvx-vol erofs build --from-tar layer.tar.gz layer.erofs
   gvx-vol erofs check rootfs.erofs
   gvx-vol erofs ls -l rootfs.erofs etc
   gvx-vol erofs cat rootfs.erofs etc/os-release`,
		Subcommands: []*cli.Command{buildCommand(), checkCommand(), lsCommand(), catCommand()},
	}
}

// openImage opens an image file for reading.
func openImage(path string) (*erofs.Image, *os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	im, err := erofs.Open(f, st.Size())
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return im, f, nil
}
