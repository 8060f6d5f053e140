package volcmd

import (
	"bufio"
	"bytes"
	"encoding/json"
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
	"z.gfire.dev/gvx/internal/termsafe"
	"z.gfire.dev/gvx/sink"
)

// Ls returns the ls verb.
func Ls() *cli.Command {
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
			return ls(c.App.Writer, c.Args().Slice(), c.Bool("l"), c.Bool("json"))
		},
	}
}

// ls lists PATH (default the root) of the volume FILE, args FILE [PATH],
// opened read-only; long as -l, asJSON as --json (with xattrs).
//
// A directory is listed as it is read: names alone need no Lstat, and -l
// and --json print each entry before the next is looked up, so what ls
// holds is the sorted names, not a header per entry (a directory a guest
// filled with a million names would otherwise cost gigabytes). -l aligns
// its columns within each run of lsChunk entries.
func ls(w io.Writer, args []string, long, asJSON bool) error {
	v, err := openVolume(args[0], true)
	if err != nil {
		return err
	}
	defer v.Close()
	p := ext4lite.CleanPath(arg(args, 1))
	h, err := v.Lstat(p)
	if err != nil {
		return err
	}
	var names []string // nil: list p itself
	if h.Type() == sink.TypeDir {
		if names, err = v.ReadDir(p); err != nil {
			return err
		}
	}
	n := len(names)
	if names == nil {
		n = 1
	}
	entry := func(i int) (*sink.Header, error) {
		if names == nil {
			h.Path = path.Base(p)
			return h, nil
		}
		eh, err := v.Lstat(path.Join(p, names[i]))
		if err != nil {
			return nil, err
		}
		eh.Path = names[i]
		return eh, nil
	}
	bw := bufio.NewWriter(w)
	switch {
	case asJSON:
		err = lsJSON(bw, n, entry)
	case long:
		err = lsLong(bw, n, entry)
	case names == nil:
		_, err = fmt.Fprintln(bw, termsafe.String(h.Path))
	default:
		for _, name := range names {
			if _, err = fmt.Fprintln(bw, termsafe.String(name)); err != nil {
				break
			}
		}
	}
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return err
}

// lsChunk is how many entries ls -l aligns together.
const lsChunk = 1024

// lsEntry is one entry of ls --json.
type lsEntry struct {
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

func lsEntryOf(e *sink.Header) lsEntry {
	j := lsEntry{Path: e.Path, Mode: sink.UnixToFileMode(e.Mode).String(), UID: e.UID, GID: e.GID,
		Size: e.Size, Nlink: e.Nlink, Ino: e.Ino, Mtime: e.Mtime, Linkname: e.Linkname, Xattrs: e.Xattrs}
	if t := e.Type(); t == sink.TypeChar || t == sink.TypeBlock {
		j.Rdev = []uint32{e.Devmajor, e.Devminor}
	}
	return j
}

// lsJSON prints the n entries as one JSON array, indented as
// cliutil.PrintJSON would print it whole, one entry at a time.
func lsJSON(w io.Writer, n int, entry func(int) (*sink.Header, error)) error {
	if n == 0 {
		_, err := io.WriteString(w, "[]\n")
		return err
	}
	if _, err := io.WriteString(w, "[\n"); err != nil {
		return err
	}
	var raw, ind bytes.Buffer
	enc := json.NewEncoder(&raw)
	for i := range n {
		e, err := entry(i)
		if err != nil {
			return err
		}
		j := lsEntryOf(e)
		raw.Reset()
		ind.Reset()
		if err := enc.Encode(j); err != nil {
			return err
		}
		if err := json.Indent(&ind, bytes.TrimSuffix(raw.Bytes(), []byte("\n")), "  ", "  "); err != nil {
			return err
		}
		sep := ",\n"
		if i == n-1 {
			sep = "\n]\n"
		}
		if _, err := fmt.Fprintf(w, "  %s%s", ind.Bytes(), sep); err != nil {
			return err
		}
	}
	return nil
}

// lsLong prints the n entries as ls -l does: right-aligned numbers, the
// padding tabwriter puts before the first column trimmed; columns are
// aligned within each run of lsChunk entries.
func lsLong(w io.Writer, n int, entry func(int) (*sink.Header, error)) error {
	var buf bytes.Buffer
	for lo := 0; lo < n; lo += lsChunk {
		buf.Reset()
		tw := tabwriter.NewWriter(&buf, 0, 0, 1, ' ', tabwriter.AlignRight)
		for i := lo; i < min(n, lo+lsChunk); i++ {
			e, err := entry(i)
			if err != nil {
				return err
			}
			size := fmt.Sprint(e.Size)
			if t := e.Type(); t == sink.TypeChar || t == sink.TypeBlock {
				size = fmt.Sprintf("%d, %d", e.Devmajor, e.Devminor)
			}
			name := termsafe.String(e.Path)
			if e.Linkname != "" {
				name += " -> " + termsafe.String(e.Linkname)
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t %s\t %s\n", modeString(e.Mode), e.Nlink, e.UID, e.GID, size,
				e.Mtime.UTC().Format("2006-01-02 15:04:05.000000000"), name)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, l := range strings.SplitAfter(buf.String(), "\n") {
			if _, err := io.WriteString(w, strings.TrimLeft(l, " ")); err != nil {
				return err
			}
		}
	}
	return nil
}

// arg is args[i], or "" past the end (as urfave/cli's Args().Get).
func arg(args []string, i int) string {
	if i < len(args) {
		return args[i]
	}
	return ""
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
