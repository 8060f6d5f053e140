// Package gvisorpatch applies gvx's gVisor patch series (patches/gvisor) to
// the pinned module and makes the workspace that builds with it: a copy of
// the module with the patched files (go refuses -overlay for files in the
// module cache), a go.work that replaces gvisor.dev/gvisor by that copy, and
// an -overlay that adds a generated file to our runtime package telling
// rungv which patches it has. That file reads the list from a package only
// the patched copy has (MarkerPkg), so the overlay without the go.work does
// not build: a binary cannot claim patches it was not compiled with.
// cmd/gvisorpatch prints the GOWORK and GOFLAGS that select them, to be
// set together.
//
// The applier is pure Go and strict: every context and removed line must
// match the file at the hunk's stated line, with no offset or fuzz, since
// the series is written against one pinned version. Outputs live in a
// per-user cache directory (owned by the user, writable by no one else,
// checked on every run) keyed by the gVisor version and the series' hash;
// each file is verified against the sha256 manifest.json records before
// use and rewritten if it differs.
package gvisorpatch

import (
	"bytes"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// FileDiff is one file's part of a unified diff.
type FileDiff struct {
	Path  string // relative to the module root, a/ and b/ stripped
	New   bool   // --- /dev/null: the file is created
	Hunks []Hunk
}

// Hunk is one @@ section.
type Hunk struct {
	Header             string // the @@ line, for errors
	OldStart, OldCount int
	NewStart, NewCount int
	Lines              []string // each with its ' ', '-' or '+' prefix
	NoNewlineOld       bool     // "\ No newline at end of file" after the old side's last line
	NoNewlineNew       bool
}

// Parse reads the unified diff in text (after any header lines) for the
// patch named name.
func Parse(name string, text []byte) ([]FileDiff, error) {
	lines := strings.Split(string(text), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var files []FileDiff
	i := 0
	for i < len(lines) {
		if !strings.HasPrefix(lines[i], "--- ") {
			i++
			continue
		}
		if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "+++ ") {
			return nil, fmt.Errorf("gvisorpatch: %s line %d: a --- line without its +++ line", name, i+1)
		}
		oldPath, newPath := diffPath(lines[i][4:]), diffPath(lines[i+1][4:])
		fd := FileDiff{Path: newPath}
		switch {
		case newPath == "/dev/null":
			return nil, fmt.Errorf("gvisorpatch: %s line %d: deletes %s: the applier only modifies and creates files", name, i+2, oldPath)
		case oldPath == "/dev/null":
			fd.New = true
		case oldPath != newPath:
			return nil, fmt.Errorf("gvisorpatch: %s line %d: renames %s to %s: the applier only modifies and creates files", name, i+1, oldPath, newPath)
		}
		if err := checkRel(fd.Path); err != nil {
			return nil, fmt.Errorf("gvisorpatch: %s line %d: %v", name, i+2, err)
		}
		i += 2
		for i < len(lines) && strings.HasPrefix(lines[i], "@@ ") {
			h, err := parseHunkHeader(lines[i])
			if err != nil {
				return nil, fmt.Errorf("gvisorpatch: %s line %d: %v", name, i+1, err)
			}
			i++
			oldN, newN := 0, 0
			for i < len(lines) && (oldN < h.OldCount || newN < h.NewCount || strings.HasPrefix(lines[i], `\`)) {
				l := lines[i]
				switch {
				case strings.HasPrefix(l, `\`):
					if len(h.Lines) == 0 {
						return nil, fmt.Errorf("gvisorpatch: %s line %d: %q before any line", name, i+1, l)
					}
					switch h.Lines[len(h.Lines)-1][0] {
					case '-':
						h.NoNewlineOld = true
					case '+':
						h.NoNewlineNew = true
					default:
						h.NoNewlineOld, h.NoNewlineNew = true, true
					}
				case l == "" || l[0] == ' ':
					if l == "" {
						l = " "
					}
					oldN++
					newN++
					h.Lines = append(h.Lines, l)
				case l[0] == '-':
					oldN++
					h.Lines = append(h.Lines, l)
				case l[0] == '+':
					newN++
					h.Lines = append(h.Lines, l)
				default:
					return nil, fmt.Errorf("gvisorpatch: %s line %d: %q is not a context, removed or added line of hunk %s", name, i+1, l, h.Header)
				}
				i++
			}
			if oldN != h.OldCount || newN != h.NewCount {
				return nil, fmt.Errorf("gvisorpatch: %s: %s: hunk %s has %d old and %d new lines, its header says %d and %d (a truncated or hand-edited patch)", name, fd.Path, h.Header, oldN, newN, h.OldCount, h.NewCount)
			}
			fd.Hunks = append(fd.Hunks, h)
		}
		if len(fd.Hunks) == 0 {
			return nil, fmt.Errorf("gvisorpatch: %s: %s has no hunk", name, fd.Path)
		}
		files = append(files, fd)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("gvisorpatch: %s: no file diff (--- and +++ lines) in it", name)
	}
	return files, nil
}

// diffPath is a --- or +++ line's path without its timestamp and a/ or b/.
func diffPath(s string) string {
	if i := strings.IndexByte(s, '\t'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimSpace(s)
	if s == "/dev/null" {
		return s
	}
	if strings.HasPrefix(s, "a/") || strings.HasPrefix(s, "b/") {
		s = s[2:]
	}
	return s
}

// checkRel refuses a path that would leave the module's root.
func checkRel(p string) error {
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") {
		return fmt.Errorf("path %q is not a clean path inside the module", p)
	}
	return nil
}

func parseHunkHeader(l string) (Hunk, error) {
	h := Hunk{Header: l}
	end := strings.Index(l[3:], " @@")
	if end < 0 {
		return h, fmt.Errorf("malformed hunk header %q", l)
	}
	h.Header = l[:3+end+3]
	f := strings.Fields(l[3 : 3+end])
	if len(f) != 2 || f[0][0] != '-' || f[1][0] != '+' {
		return h, fmt.Errorf("malformed hunk header %q", l)
	}
	var err error
	if h.OldStart, h.OldCount, err = rangeOf(f[0][1:]); err != nil {
		return h, fmt.Errorf("hunk header %q: %v", l, err)
	}
	if h.NewStart, h.NewCount, err = rangeOf(f[1][1:]); err != nil {
		return h, fmt.Errorf("hunk header %q: %v", l, err)
	}
	return h, nil
}

func rangeOf(s string) (start, count int, err error) {
	a, b, ok := strings.Cut(s, ",")
	if start, err = strconv.Atoi(a); err != nil || start < 0 {
		return 0, 0, fmt.Errorf("bad range %q", s)
	}
	count = 1
	if ok {
		if count, err = strconv.Atoi(b); err != nil || count < 0 {
			return 0, 0, fmt.Errorf("bad range %q", s)
		}
	}
	return start, count, nil
}

// ApplyFile applies fd's hunks to old (nil for a new file) and returns the
// new content. Every context and removed line must be at the line its hunk
// says; the error names the patch, the file, the hunk and the line that
// does not match.
func ApplyFile(patchName string, fd FileDiff, old []byte) ([]byte, error) {
	if fd.New && old != nil {
		return nil, fmt.Errorf("gvisorpatch: %s: %s: creates a file that already exists", patchName, fd.Path)
	}
	var src []string
	oldNoEOL := false
	if len(old) > 0 {
		s := string(old)
		if !strings.HasSuffix(s, "\n") {
			oldNoEOL = true
		} else {
			s = s[:len(s)-1]
		}
		src = strings.Split(s, "\n")
	}
	var out []string
	next := 0 // index in src of the next line not yet copied
	newNoEOL := oldNoEOL
	for hi, h := range fd.Hunks {
		at := h.OldStart - 1 // 0-based index of the hunk's first old line
		if h.OldCount == 0 {
			at = h.OldStart // "-N,0": insert after line N
		}
		if at < next || at > len(src) {
			return nil, fmt.Errorf("gvisorpatch: %s: %s: hunk %d (%s) starts at line %d, outside the file's %d lines or before the previous hunk's end: the patch does not fit this gVisor", patchName, fd.Path, hi+1, h.Header, h.OldStart, len(src))
		}
		out = append(out, src[next:at]...)
		pos := at
		for _, l := range h.Lines {
			switch l[0] {
			case ' ', '-':
				if pos >= len(src) {
					return nil, fmt.Errorf("gvisorpatch: %s: %s: hunk %d (%s) expects line %d %q, but the file has only %d lines: the patch does not fit this gVisor", patchName, fd.Path, hi+1, h.Header, pos+1, l[1:], len(src))
				}
				if src[pos] != l[1:] {
					return nil, fmt.Errorf("gvisorpatch: %s: %s: hunk %d (%s): line %d is %q, the patch expects %q: the patch does not fit this gVisor", patchName, fd.Path, hi+1, h.Header, pos+1, src[pos], l[1:])
				}
				if l[0] == ' ' {
					out = append(out, src[pos])
				}
				pos++
			case '+':
				out = append(out, l[1:])
			}
		}
		if h.NoNewlineOld && pos != len(src) {
			return nil, fmt.Errorf("gvisorpatch: %s: %s: hunk %d (%s) ends the file, but the file goes on after line %d", patchName, fd.Path, hi+1, h.Header, pos)
		}
		if pos == len(src) {
			newNoEOL = h.NoNewlineNew
		}
		next = pos
	}
	out = append(out, src[next:]...)
	var b bytes.Buffer
	b.WriteString(strings.Join(out, "\n"))
	if len(out) > 0 && !newNoEOL {
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}
