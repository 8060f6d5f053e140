package volcore

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"text/tabwriter"
	"time"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/clibase"
	"z.gfire.dev/gvx/cmd/gvx-vol/internal/fastflag"
	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/internal/termsafe"
	"z.gfire.dev/gvx/sink"
)

// LsArgsUsage is the ls verb's argument synopsis.
const LsArgsUsage = "[-l] FILE [PATH]"

// LsFlags are ls's flags.
var LsFlags = []fastflag.Flag{
	{Name: "l", Kind: fastflag.Bool, Usage: "long listing"},
	{Name: "json", Kind: fastflag.Bool, Usage: "print entries as JSON (with xattrs)"},
}

// Ls runs the ls verb (a fastflag.RunFunc): PATH (default the root) of
// the volume FILE, opened read-only; -l long, --json with xattrs.
func Ls(w io.Writer, helpName string, f fastflag.Flagger, args []string) error {
	if len(args) < 1 || len(args) > 2 {
		return clibase.Usage(helpName, LsArgsUsage, "want FILE and an optional PATH")
	}
	v, err := OpenVolume(args[0], true)
	if err != nil {
		return err
	}
	defer v.Close()
	p := ext4lite.CleanPath(arg(args, 1))
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
	if f.Bool("json") {
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
		return clibase.PrintJSON(w, out)
	}
	if !f.Bool("l") {
		for _, e := range entries {
			fmt.Fprintln(w, termsafe.String(e.Path))
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
