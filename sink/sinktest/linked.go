package sinktest

import (
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync/atomic"

	"z.gfire.dev/gvx/sink"
)

// Linked is a read-only sink.Source whose directories are hard-linked as
// a crafted ext4 volume's or EROFS image's can be (debugfs's link does
// it), for testing that walkers enter each directory once. Dirs maps a
// directory's Ino to its entries (name → Ino); the root is Ino 1; an Ino
// that is not in Dirs is a regular file holding "x". Lookups past MaxCalls
// (default 10,000) fail, so a walker that does not stop fails its test
// instead of hanging it.
type Linked struct {
	Dirs     map[uint64]map[string]uint64
	MaxCalls int64
	calls    atomic.Int64
}

// LinkedCycle returns a tree with a cycle: "a/up" is the root again, so
// a/up/a/up/… never ends.
func LinkedCycle() *Linked {
	return &Linked{Dirs: map[uint64]map[string]uint64{
		1: {"a": 2},
		2: {"f": 3, "up": 1},
	}}
}

// LinkedDAG returns a tree without a cycle whose depth directories each
// name the next one twice ("x" and "y"): depth+1 directories, 2^depth
// paths to the file at the bottom.
func LinkedDAG(depth int) *Linked {
	l := &Linked{Dirs: map[uint64]map[string]uint64{}}
	for d := range uint64(depth) {
		l.Dirs[d+1] = map[string]uint64{"x": d + 2, "y": d + 2}
	}
	l.Dirs[uint64(depth)+1] = map[string]uint64{"f": uint64(depth) + 2}
	return l
}

var _ sink.Source = (*Linked)(nil)

func (l *Linked) lookup(op, p string) (uint64, error) {
	limit := l.MaxCalls
	if limit <= 0 {
		limit = 10000
	}
	if l.calls.Add(1) > limit {
		return 0, fmt.Errorf("sinktest: Linked: %s %.80q: past %d lookups, the walk does not stop", op, p, limit)
	}
	ino := uint64(1)
	if p == "." {
		return ino, nil
	}
	for _, el := range strings.Split(p, "/") {
		ents, ok := l.Dirs[ino]
		if !ok {
			return 0, &fs.PathError{Op: op, Path: p, Err: fs.ErrNotExist}
		}
		if ino, ok = ents[el]; !ok {
			return 0, &fs.PathError{Op: op, Path: p, Err: fs.ErrNotExist}
		}
	}
	return ino, nil
}

// Lstat implements sink.Source.
func (l *Linked) Lstat(p string) (*sink.Header, error) {
	ino, err := l.lookup("lstat", p)
	if err != nil {
		return nil, err
	}
	if ents, ok := l.Dirs[ino]; ok {
		return &sink.Header{Path: p, Mode: sink.TypeDir | 0o755, Ino: ino, Nlink: uint32(2 + len(ents))}, nil
	}
	return &sink.Header{Path: p, Mode: sink.TypeReg | 0o644, Size: 1, Ino: ino, Nlink: 1}, nil
}

// ReadDir implements sink.Source.
func (l *Linked) ReadDir(p string) ([]string, error) {
	ino, err := l.lookup("readdir", p)
	if err != nil {
		return nil, err
	}
	ents, ok := l.Dirs[ino]
	if !ok {
		return nil, &fs.PathError{Op: "readdir", Path: p, Err: fs.ErrInvalid}
	}
	names := make([]string, 0, len(ents))
	for n := range ents {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

// Open implements sink.Source.
func (l *Linked) Open(p string) (io.ReadCloser, error) {
	ino, err := l.lookup("open", p)
	if err != nil {
		return nil, err
	}
	if _, ok := l.Dirs[ino]; ok {
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrInvalid}
	}
	return io.NopCloser(strings.NewReader("x")), nil
}
