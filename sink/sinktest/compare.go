package sinktest

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"z.gfire.dev/gvx/sink"
)

// CompareOptions relaxes Compare for metadata a target cannot keep.
type CompareOptions struct {
	IgnoreAtime  bool // reading a file may change it
	IgnoreCtime  bool // no API sets it on most systems
	IgnoreCrtime bool
	IgnoreMtime  bool
	// IgnoreDirSize skips directory sizes (0 in MemFS, block multiples on disk).
	IgnoreDirSize bool
	// IgnoreRoot skips the root directory's own metadata (its children are
	// still compared).
	IgnoreRoot bool
	// IgnoreSymlinkPerm skips permission bits of symlinks (always 0777 on Linux).
	IgnoreSymlinkPerm bool
	// IgnoreSpecialHardLinks skips hard-link grouping of devices, fifos and
	// sockets (GNU tar archives each name as its own node).
	IgnoreSpecialHardLinks bool
	// IgnoreOwner skips uid and gid.
	IgnoreOwner bool
	// IgnoreXattrPrefixes skips xattrs whose name starts with any of these
	// ("security.selinux", "trusted.overlay.").
	IgnoreXattrPrefixes []string
	// MaxDiffs caps the differences reported; 0 means 100.
	MaxDiffs int
}

// DiffError lists the differences Compare found, one line each.
type DiffError struct {
	Diffs     []string
	Truncated bool // more differences exist than listed
}

func (e *DiffError) Error() string {
	s := fmt.Sprintf("sinktest: trees differ in %d places", len(e.Diffs))
	if e.Truncated {
		s = fmt.Sprintf("sinktest: trees differ in more than %d places", len(e.Diffs))
	}
	return s + ":\n\t" + strings.Join(e.Diffs, "\n\t")
}

type comparer struct {
	a, b  sink.Source
	o     CompareOptions
	diffs []string
	full  bool
	// first path seen per Ino, per tree: hard-link groups
	linkA, linkB map[uint64]string
}

var errStop = errors.New("stop")

func (c *comparer) addf(format string, args ...any) error {
	max := c.o.MaxDiffs
	if max <= 0 {
		max = 100
	}
	if len(c.diffs) >= max {
		c.full = true
		return errStop
	}
	c.diffs = append(c.diffs, fmt.Sprintf(format, args...))
	return nil
}

// Compare walks trees a and b from their roots and reports every difference
// in type, mode (incl. setuid/setgid/sticky), owner, size, content, symlink
// target, device numbers, hard-link grouping (by Ino), xattrs and times to
// the nanosecond, as a *DiffError. Entries only in one tree are reported
// once, not walked. A nil result means the trees are equal under o.
func Compare(a, b sink.Source, o CompareOptions) error {
	c := &comparer{a: a, b: b, o: o, linkA: map[uint64]string{}, linkB: map[uint64]string{}}
	err := c.walk(".")
	if err != nil && err != errStop {
		return err
	}
	if len(c.diffs) > 0 {
		return &DiffError{Diffs: c.diffs, Truncated: c.full}
	}
	return nil
}

func (c *comparer) walk(p string) error {
	ha, err := c.a.Lstat(p)
	if err != nil {
		return fmt.Errorf("sinktest: compare: tree a: %w", err)
	}
	hb, err := c.b.Lstat(p)
	if err != nil {
		return fmt.Errorf("sinktest: compare: tree b: %w", err)
	}
	if p != "." || !c.o.IgnoreRoot {
		same, err := c.entry(p, ha, hb)
		if err != nil || !same {
			return err
		}
	} else if ha.Type() != hb.Type() {
		return c.addf("%s: type %s vs %s", p, typeName(ha.Mode), typeName(hb.Mode))
	}
	if ha.Type() != sink.TypeDir {
		return nil
	}
	na, err := c.a.ReadDir(p)
	if err != nil {
		return fmt.Errorf("sinktest: compare: tree a: %w", err)
	}
	nb, err := c.b.ReadDir(p)
	if err != nil {
		return fmt.Errorf("sinktest: compare: tree b: %w", err)
	}
	i, j := 0, 0
	for i < len(na) || j < len(nb) {
		switch {
		case j == len(nb) || (i < len(na) && na[i] < nb[j]):
			if err := c.addf("%s: only in a", join(p, na[i])); err != nil {
				return err
			}
			i++
		case i == len(na) || nb[j] < na[i]:
			if err := c.addf("%s: only in b", join(p, nb[j])); err != nil {
				return err
			}
			j++
		default:
			if err := c.walk(join(p, na[i])); err != nil {
				return err
			}
			i++
			j++
		}
	}
	return nil
}

// entry compares one entry present in both trees; same is false when the
// types differ (and the subtree is not walked).
func (c *comparer) entry(p string, ha, hb *sink.Header) (same bool, err error) {
	if ha.Type() != hb.Type() {
		return false, c.addf("%s: type %s vs %s", p, typeName(ha.Mode), typeName(hb.Mode))
	}
	t := ha.Type()
	pa, pb := ha.Mode&sink.ModePerm, hb.Mode&sink.ModePerm
	if pa != pb && !(t == sink.TypeSymlink && c.o.IgnoreSymlinkPerm) {
		if err := c.addf("%s: mode %04o vs %04o", p, pa, pb); err != nil {
			return true, err
		}
	}
	if !c.o.IgnoreOwner && (ha.UID != hb.UID || ha.GID != hb.GID) {
		if err := c.addf("%s: owner %d:%d vs %d:%d", p, ha.UID, ha.GID, hb.UID, hb.GID); err != nil {
			return true, err
		}
	}
	// A second name of a hard link was read through its first name already,
	// which may have moved its atime; it was compared then.
	_, seenA := c.linkA[ha.Ino]
	_, seenB := c.linkB[hb.Ino]
	relinked := t != sink.TypeDir && seenA && seenB
	checks := []struct {
		skip bool
		name string
		a, b time.Time
	}{
		{c.o.IgnoreAtime || relinked, "atime", ha.Atime, hb.Atime},
		{c.o.IgnoreMtime, "mtime", ha.Mtime, hb.Mtime},
		{c.o.IgnoreCtime, "ctime", ha.Ctime, hb.Ctime},
		{c.o.IgnoreCrtime, "crtime", ha.Crtime, hb.Crtime},
	}
	for _, ck := range checks {
		if !ck.skip && !normTime(ck.a).Equal(normTime(ck.b)) {
			if err := c.addf("%s: %s %s vs %s", p, ck.name, fmtTime(ck.a), fmtTime(ck.b)); err != nil {
				return true, err
			}
		}
	}
	if err := c.xattrs(p, ha.Xattrs, hb.Xattrs); err != nil {
		return true, err
	}
	switch t {
	case sink.TypeDir:
		if !c.o.IgnoreDirSize && ha.Size != hb.Size {
			return true, c.addf("%s: dir size %d vs %d", p, ha.Size, hb.Size)
		}
	case sink.TypeSymlink:
		if ha.Linkname != hb.Linkname {
			return true, c.addf("%s: symlink target %q vs %q", p, ha.Linkname, hb.Linkname)
		}
	case sink.TypeChar, sink.TypeBlock:
		if ha.Devmajor != hb.Devmajor || ha.Devminor != hb.Devminor {
			return true, c.addf("%s: device %d:%d vs %d:%d", p, ha.Devmajor, ha.Devminor, hb.Devmajor, hb.Devminor)
		}
	case sink.TypeReg:
		if ha.Size != hb.Size {
			return true, c.addf("%s: size %d vs %d", p, ha.Size, hb.Size)
		}
		if err := c.content(p); err != nil {
			return true, err
		}
	}
	special := t != sink.TypeReg && t != sink.TypeSymlink
	if t != sink.TypeDir && !(special && c.o.IgnoreSpecialHardLinks) {
		la, oka := c.linkA[ha.Ino]
		if !oka {
			c.linkA[ha.Ino] = p
			la = p
		}
		lb, okb := c.linkB[hb.Ino]
		if !okb {
			c.linkB[hb.Ino] = p
			lb = p
		}
		if la != lb {
			return true, c.addf("%s: hard-linked with %q in a, with %q in b", p, la, lb)
		}
	}
	return true, nil
}

func (c *comparer) xattrs(p string, xa, xb map[string][]byte) error {
	keep := func(k string) bool {
		for _, pre := range c.o.IgnoreXattrPrefixes {
			if strings.HasPrefix(k, pre) {
				return false
			}
		}
		return true
	}
	keys := map[string]bool{}
	for k := range xa {
		keys[k] = true
	}
	for k := range xb {
		keys[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if !keep(k) {
			continue
		}
		va, oka := xa[k]
		vb, okb := xb[k]
		var err error
		switch {
		case !okb:
			err = c.addf("%s: xattr %s only in a", p, k)
		case !oka:
			err = c.addf("%s: xattr %s only in b", p, k)
		case !bytes.Equal(va, vb):
			err = c.addf("%s: xattr %s = %s vs %s", p, k, short(va), short(vb))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *comparer) content(p string) error {
	ra, err := c.a.Open(p)
	if err != nil {
		return fmt.Errorf("sinktest: compare: tree a: %w", err)
	}
	defer ra.Close()
	rb, err := c.b.Open(p)
	if err != nil {
		return fmt.Errorf("sinktest: compare: tree b: %w", err)
	}
	defer rb.Close()
	if rs, ok := c.dataUnion(p); ok {
		// Both trees know where the data is: compare there only (the
		// rest is zeros in both), so a file of any apparent size costs
		// its data.
		xa, oka := ra.(io.ReaderAt)
		xb, okb := rb.(io.ReaderAt)
		if oka && okb {
			for _, r := range rs {
				if err := c.contentAt(p, xa, xb, r); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return c.stream(p, ra, rb)
}

// dataUnion returns the union of both trees' data regions of p, when both
// are sink.DataMappers.
func (c *comparer) dataUnion(p string) ([]sink.Region, bool) {
	ma, oka := c.a.(sink.DataMapper)
	mb, okb := c.b.(sink.DataMapper)
	if !oka || !okb {
		return nil, false
	}
	ra, erra := ma.DataRegions(p)
	rb, errb := mb.DataRegions(p)
	if erra != nil || errb != nil {
		return nil, false
	}
	all := append(slices.Clone(ra), rb...)
	slices.SortFunc(all, func(x, y sink.Region) int { return cmp.Compare(x.Off, y.Off) })
	var out []sink.Region
	for _, r := range all {
		if k := len(out) - 1; k >= 0 && r.Off <= out[k].Off+out[k].Len {
			out[k].Len = max(out[k].Len, r.Off+r.Len-out[k].Off)
			continue
		}
		out = append(out, r)
	}
	return out, true
}

// contentAt compares region r of p in both trees.
func (c *comparer) contentAt(p string, ra, rb io.ReaderAt, r sink.Region) error {
	ba, bb := make([]byte, 32<<10), make([]byte, 32<<10)
	for off := r.Off; off < r.Off+r.Len; {
		n := int(min(int64(len(ba)), r.Off+r.Len-off))
		na, ea := ra.ReadAt(ba[:n], off)
		nb, eb := rb.ReadAt(bb[:n], off)
		if ea != nil && ea != io.EOF {
			return fmt.Errorf("sinktest: compare: tree a: %s: %w", p, ea)
		}
		if eb != nil && eb != io.EOF {
			return fmt.Errorf("sinktest: compare: tree b: %s: %w", p, eb)
		}
		if !bytes.Equal(ba[:na], bb[:nb]) {
			i := 0
			for i < min(na, nb) && ba[i] == bb[i] {
				i++
			}
			return c.addf("%s: content differs at byte %d", p, off+int64(i))
		}
		if na < n {
			return nil // both ended (the sizes were compared already)
		}
		off += int64(n)
	}
	return nil
}

// stream compares p's contents read from start to end.
func (c *comparer) stream(p string, ra, rb io.Reader) error {
	ba, bb := make([]byte, 32<<10), make([]byte, 32<<10)
	var off int64
	for {
		na, ea := io.ReadFull(ra, ba)
		nb, eb := io.ReadFull(rb, bb)
		if ea != nil && ea != io.EOF && ea != io.ErrUnexpectedEOF {
			return fmt.Errorf("sinktest: compare: tree a: %s: %w", p, ea)
		}
		if eb != nil && eb != io.EOF && eb != io.ErrUnexpectedEOF {
			return fmt.Errorf("sinktest: compare: tree b: %s: %w", p, eb)
		}
		if !bytes.Equal(ba[:na], bb[:nb]) {
			n := min(na, nb)
			i := 0
			for i < n && ba[i] == bb[i] {
				i++
			}
			return c.addf("%s: content differs at byte %d", p, off+int64(i))
		}
		off += int64(na)
		if ea != nil || eb != nil {
			return nil
		}
	}
}

func typeName(m uint32) string {
	switch m & sink.TypeMask {
	case sink.TypeReg:
		return "file"
	case sink.TypeDir:
		return "dir"
	case sink.TypeSymlink:
		return "symlink"
	case sink.TypeChar:
		return "chardev"
	case sink.TypeBlock:
		return "blockdev"
	case sink.TypeFifo:
		return "fifo"
	case sink.TypeSocket:
		return "socket"
	}
	return fmt.Sprintf("type(%o)", m&sink.TypeMask)
}

func fmtTime(t time.Time) string {
	t = normTime(t)
	return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond())
}

func short(v []byte) string {
	if len(v) > 32 {
		return fmt.Sprintf("%q…(%d bytes)", v[:32], len(v))
	}
	return fmt.Sprintf("%q", v)
}
