package erofscmd

import (
	"fmt"
	"path"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/internal/termsafe"
	"z.gfire.dev/gvx/sink"
)

func lsCommand() *cli.Command {
	return &cli.Command{
		Name:      "ls",
		Usage:     "list a directory of an EROFS image",
		ArgsUsage: "IMAGE [PATH]",
		Description: `Lists PATH (default: the root) inside IMAGE without mounting it. PATH is
relative to the image root and never goes through a symlink.

Examples:
   gvx-vol erofs ls rootfs.erofs
   gvx-vol erofs ls -l rootfs.erofs usr/bin`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "long", Aliases: []string{"l"}, Usage: "show mode, owner, size, mtime and link targets"},
		},
		Action: runLs,
	}
}

func runLs(c *cli.Context) error {
	if c.NArg() < 1 || c.NArg() > 2 {
		return cliutil.Usage(c, "need IMAGE and optionally PATH")
	}
	im, f, err := openImage(c.Args().Get(0))
	if err != nil {
		return err
	}
	defer f.Close()
	p := cleanPath(c.Args().Get(1))
	names, err := im.ReadDir(p)
	if err != nil {
		return err
	}
	for _, n := range names {
		if !c.Bool("long") {
			fmt.Fprintln(c.App.Writer, termsafe.String(n))
			continue
		}
		h, err := im.Lstat(path.Join(p, n))
		if err != nil {
			return err
		}
		size := fmt.Sprint(h.Size)
		if t := h.Type(); t == sink.TypeChar || t == sink.TypeBlock {
			size = fmt.Sprintf("%d, %d", h.Devmajor, h.Devminor)
		}
		line := fmt.Sprintf("%s %3d %6d %6d %10s %s %s", sink.UnixToFileMode(h.Mode), h.Nlink, h.UID, h.GID, size,
			h.Mtime.UTC().Format("2006-01-02 15:04:05.000000000"), termsafe.String(n))
		if h.Linkname != "" {
			line += " -> " + termsafe.String(h.Linkname)
		}
		fmt.Fprintln(c.App.Writer, line)
	}
	return nil
}

// cleanPath turns a user's path into the sink form ("." for the root).
func cleanPath(p string) string {
	p = path.Clean("/" + p)[1:]
	if p == "" {
		return "."
	}
	return p
}
