package image

import (
	"io"
	"maps"
	"slices"
	"strings"

	"z.gfire.dev/gvx/sink"
)

// maxDroppedList caps Result.DroppedXattrs; Result.Dropped still counts all.
const maxDroppedList = 1000

// xattrTracker passes every call through to a sink and remembers which
// xattrs the flattened tree holds, path by path, as layers replace and
// delete entries. The runtime profile drops xattrs as they arrive; this
// says which of them the image would really have had, not every one a lower
// layer set on a file that a later layer removed.
type xattrTracker struct {
	sink.Sink
	have map[string][]string // path → xattr names, for entries with some
}

func newXattrTracker(s sink.Sink) *xattrTracker {
	return &xattrTracker{Sink: s, have: map[string][]string{}}
}

func (x *xattrTracker) note(h *sink.Header) {
	if len(h.Xattrs) == 0 {
		delete(x.have, h.Path)
		return
	}
	x.have[h.Path] = slices.Sorted(maps.Keys(h.Xattrs))
}

func (x *xattrTracker) Mkdir(h *sink.Header) error {
	err := x.Sink.Mkdir(h)
	if err == nil {
		x.note(h)
	}
	return err
}

func (x *xattrTracker) WriteFile(h *sink.Header, r io.Reader) error {
	err := x.Sink.WriteFile(h, r)
	if err == nil {
		x.note(h)
	}
	return err
}

func (x *xattrTracker) Symlink(h *sink.Header) error {
	err := x.Sink.Symlink(h)
	if err == nil {
		x.note(h)
	}
	return err
}

func (x *xattrTracker) Mknod(h *sink.Header) error {
	err := x.Sink.Mknod(h)
	if err == nil {
		x.note(h)
	}
	return err
}

func (x *xattrTracker) Link(oldname, newname string) error {
	err := x.Sink.Link(oldname, newname)
	if err == nil {
		if names, ok := x.have[oldname]; ok {
			x.have[newname] = names
		} else {
			delete(x.have, newname)
		}
	}
	return err
}

func (x *xattrTracker) RemoveAll(p string) error {
	err := x.Sink.RemoveAll(p)
	if err == nil {
		if p == "" || p == "." {
			clear(x.have)
		}
		for k := range x.have {
			if k == p || strings.HasPrefix(k, p+"/") {
				delete(x.have, k)
			}
		}
	}
	return err
}

// dropped lists "path: name" for every xattr of the final tree, sorted,
// capped at maxDroppedList, and counts them all.
func (x *xattrTracker) dropped() ([]string, int) {
	var list []string
	n := 0
	for _, p := range slices.Sorted(maps.Keys(x.have)) {
		for _, name := range x.have[p] {
			n++
			if len(list) < maxDroppedList {
				list = append(list, p+": "+name)
			}
		}
	}
	return list, n
}
