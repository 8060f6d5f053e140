package volcmd

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/sink"
)

func lsCommand() *cli.Command {
	return &cli.Command{
		Name:      "ls",
		Usage:     "list a directory of a volume",
		ArgsUsage: "[-l] FILE [PATH]",
		Description: `Lists PATH (default the root) of the volume FILE without mounting it.
-l shows mode, links, owner, size (or device numbers), mtime with
nanoseconds, and symlink targets; --json prints one object per entry with
xattrs. The volume is opened read-only.

Examples:
   gvx-vol ls golden-docker.ext4
   gvx-vol ls -l golden-docker.ext4 /overlay2
   gvx-vol ls --json vol.ext4 /etc | jq -r '.[].path'`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "l", Usage: "long listing"},
			&cli.BoolFlag{Name: "json", Usage: "print entries as JSON (with xattrs)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() < 1 || c.NArg() > 2 {
				return cliutil.Usage(c, "want FILE and an optional PATH")
			}
			v, err := openVolume(c.Args().Get(0), true)
			if err != nil {
				return err
			}
			defer v.Close()
			p := ext4lite.CleanPath(c.Args().Get(1))
			h, err := v.Lstat(p)
			if err != nil {
				return err
			}
			var entries []*sink.Header
			if h.Type() == sink.TypeDir {
				names, err := v.ReadDir(p)
				if err != nil {
					return err
				}
				for _, n := range names {
					eh, err := v.Lstat(path.Join(p, n))
					if err != nil {
						return err
					}
					eh.Path = n
					entries = append(entries, eh)
				}
			} else {
				h.Path = path.Base(p)
				entries = append(entries, h)
			}
			if c.Bool("json") {
				type jentry struct {
					Path     string            `json:"path"`
					Mode     string            `json:"mode"`
					UID      uint32            `json:"uid"`
					GID      uint32            `json:"gid"`
					Size     int64             `json:"size"`
					Nlink    uint32            `json:"nlink"`
					Ino      uint64            `json:"ino"`
					Mtime    time.Time         `json:"mtime"`
					Linkname string            `json:"linkname,omitempty"`
					Rdev     []uint32          `json:"rdev,omitempty"`
					Xattrs   map[string][]byte `json:"xattrs,omitempty"`
				}
				out := []jentry{}
				for _, e := range entries {
					j := jentry{Path: e.Path, Mode: sink.UnixToFileMode(e.Mode).String(), UID: e.UID, GID: e.GID,
						Size: e.Size, Nlink: e.Nlink, Ino: e.Ino, Mtime: e.Mtime, Linkname: e.Linkname, Xattrs: e.Xattrs}
					if t := e.Type(); t == sink.TypeChar || t == sink.TypeBlock {
						j.Rdev = []uint32{e.Devmajor, e.Devminor}
					}
					out = append(out, j)
				}
				return cliutil.PrintJSON(c.App.Writer, out)
			}
			if !c.Bool("l") {
				for _, e := range entries {
					fmt.Fprintln(c.App.Writer, e.Path)
				}
				return nil
			}
			// Right-aligned numbers as ls -l prints them; the padding
			// tabwriter puts before the first column is trimmed.
			var buf bytes.Buffer
			tw := tabwriter.NewWriter(&buf, 0, 0, 1, ' ', tabwriter.AlignRight)
			for _, e := range entries {
				size := fmt.Sprint(e.Size)
				if t := e.Type(); t == sink.TypeChar || t == sink.TypeBlock {
					size = fmt.Sprintf("%d, %d", e.Devmajor, e.Devminor)
				}
				name := e.Path
				if e.Linkname != "" {
					name += " -> " + e.Linkname
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t %s\t %s\n", modeString(e.Mode), e.Nlink, e.UID, e.GID, size,
					e.Mtime.UTC().Format("2006-01-02 15:04:05.000000000"), name)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, l := range strings.SplitAfter(buf.String(), "\n") {
				if _, err := io.WriteString(c.App.Writer, strings.TrimLeft(l, " ")); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// modeString renders a mode as ls -l does ("drwxr-xr-x", "crw-------").
func modeString(m uint32) string {
	s := []byte(fs.FileMode(m & 0o777).String())
	switch m & sink.TypeMask {
	case sink.TypeDir:
		s[0] = 'd'
	case sink.TypeSymlink:
		s[0] = 'l'
	case sink.TypeChar:
		s[0] = 'c'
	case sink.TypeBlock:
		s[0] = 'b'
	case sink.TypeFifo:
		s[0] = 'p'
	case sink.TypeSocket:
		s[0] = 's'
	}
	set := func(i int, on bool, x, noX byte) {
		if on {
			if s[i] == 'x' {
				s[i] = x
			} else {
				s[i] = noX
			}
		}
	}
	set(3, m&sink.ModeSetuid != 0, 's', 'S')
	set(6, m&sink.ModeSetgid != 0, 's', 'S')
	set(9, m&sink.ModeSticky != 0, 't', 'T')
	return string(s)
}
