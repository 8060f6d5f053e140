package ext4lite

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"syscall"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
	"z.gfire.dev/gvx/sink"
)

// xattr is one extended attribute with its full name ("user.foo").
type xattr struct {
	name  string
	value []byte
}

// loadXattrs reads in's in-inode and block attributes.
func (v *FS) loadXattrs(in *inode) ([]xattr, error) {
	if in.xattrsOK {
		return in.xattrs, nil
	}
	var out []xattr
	if start := disk.GoodOldInodeSize + int(in.d.ExtraIsize); v.inodeSize > disk.GoodOldInodeSize && start+disk.XattrIbodyHeaderLen <= v.inodeSize {
		area := in.slot[start:]
		if binary.LittleEndian.Uint32(area) == disk.XattrMagic {
			xs, err := parseXattrEntries(area[disk.XattrIbodyHeaderLen:], area[disk.XattrIbodyHeaderLen:], in.ino)
			if err != nil {
				return nil, err
			}
			out = append(out, xs...)
		}
	}
	if blk := in.d.FileACL(); blk != 0 {
		if blk < v.firstDataBlock || blk >= v.blocksCount {
			return nil, corruptf(-1, in.ino, "xattr block %d outside the filesystem", blk)
		}
		b := make([]byte, v.bs)
		if err := v.readBlock(blk, b); err != nil {
			return nil, err
		}
		if binary.LittleEndian.Uint32(b) != disk.XattrMagic || binary.LittleEndian.Uint32(b[8:]) != 1 {
			return nil, corruptf(int64(blk)*int64(v.bs), in.ino, "bad xattr block header")
		}
		if v.csum && binary.LittleEndian.Uint32(b[16:]) != disk.XattrBlockChecksum(v.seed, blk, b) {
			return nil, corruptf(int64(blk)*int64(v.bs), in.ino, "xattr block checksum mismatch")
		}
		xs, err := parseXattrEntries(b[disk.XattrBlockHeaderLen:], b, in.ino)
		if err != nil {
			return nil, err
		}
		out = append(out, xs...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	in.xattrs, in.xattrsOK = out, true
	return out, nil
}

// parseXattrEntries decodes entries starting at ents; value offsets are
// relative to base.
func parseXattrEntries(ents, base []byte, ino uint32) ([]xattr, error) {
	var out []xattr
	p := 0
	for {
		if p+4 > len(ents) {
			return nil, corruptf(-1, ino, "xattr entries run past their area")
		}
		if binary.LittleEndian.Uint32(ents[p:]) == 0 {
			return out, nil
		}
		if p+disk.XattrEntryLen > len(ents) {
			return nil, corruptf(-1, ino, "xattr entry header past its area")
		}
		e := disk.DecodeXattrEntry(ents[p:])
		nameEnd := p + disk.XattrEntryLen + int(e.NameLen)
		if nameEnd > len(ents) {
			return nil, corruptf(-1, ino, "xattr name past its area")
		}
		suffix := string(ents[p+disk.XattrEntryLen : nameEnd])
		if e.ValueInum != 0 {
			return nil, fmt.Errorf("inode %d: %w: xattr values in inodes (ea_inode)", ino, ErrUnsupported)
		}
		vs, vo := int(e.ValueSize), int(e.ValueOffs)
		if vo+vs > len(base) || vs < 0 {
			return nil, corruptf(-1, ino, "xattr value (%d bytes at %d) past its area", vs, vo)
		}
		name, ok := disk.XattrJoinName(e.NameIndex, suffix)
		if !ok {
			return nil, corruptf(-1, ino, "xattr name index %d", e.NameIndex)
		}
		out = append(out, xattr{name: name, value: bytes.Clone(base[vo : vo+vs])})
		p += disk.XattrEntrySize(int(e.NameLen))
	}
}

// xattrPackSize is the space an entry and its value take.
func xattrPackSize(x xattr) int {
	_, suffix, _ := disk.XattrSplitName(x.name)
	return disk.XattrEntrySize(len(suffix)) + disk.XattrValueSize(len(x.value))
}

// packXattrs lays out xs in area: entries from entOff on, values from the
// end downward, offsets relative to base. It reports false when they do
// not fit. It returns the entry hashes.
func packXattrs(area []byte, entOff, baseOff int, xs []xattr) ([]uint32, bool) {
	clear(area[entOff:])
	p, vend := entOff, len(area)
	var hashes []uint32
	for _, x := range xs {
		idx, suffix, _ := disk.XattrSplitName(x.name)
		vsz := disk.XattrValueSize(len(x.value))
		esz := disk.XattrEntrySize(len(suffix))
		if p+esz+4 > vend-vsz {
			return nil, false
		}
		voff := vend - vsz
		if len(x.value) == 0 {
			voff = vend // kernel convention: empty values have offset 0? use end; fixed below
		}
		copy(area[voff:], x.value)
		e := disk.XattrEntry{NameLen: uint8(len(suffix)), NameIndex: idx, ValueSize: uint32(len(x.value))}
		if len(x.value) > 0 {
			e.ValueOffs = uint16(voff - baseOff)
			vend = voff
		}
		e.Hash = disk.XattrEntryHash([]byte(suffix), x.value)
		e.EncodeInto(area[p:])
		copy(area[p+disk.XattrEntryLen:], suffix)
		hashes = append(hashes, e.Hash)
		p += esz
	}
	return hashes, true
}

// storeXattrs writes in's attributes: in the inode's spare space first, the
// rest in an external block (allocated, or rewritten in place when not
// shared).
func (v *FS) storeXattrs(in *inode) error {
	if !in.xattrDirt {
		return nil
	}
	xs := in.xattrs
	for _, x := range xs {
		if _, _, ok := disk.XattrSplitName(x.name); !ok {
			return fmt.Errorf("xattr %q: %w: namespace not storable in ext4", x.name, ErrUnsupported)
		}
	}
	sorted := sortedForStore(xs)
	var inInode, inBlock []xattr
	start := disk.GoodOldInodeSize + int(in.d.ExtraIsize)
	room := v.inodeSize - start - disk.XattrIbodyHeaderLen - 4
	for _, x := range sorted {
		if sz := xattrPackSize(x); sz <= room && len(inBlock) == 0 {
			inInode = append(inInode, x)
			room -= sz
		} else {
			inBlock = append(inBlock, x)
		}
	}
	if v.inodeSize > disk.GoodOldInodeSize {
		area := in.slot[start:]
		clear(area)
		if len(inInode) > 0 {
			binary.LittleEndian.PutUint32(area, disk.XattrMagic)
			if _, ok := packXattrs(area, disk.XattrIbodyHeaderLen, disk.XattrIbodyHeaderLen, inInode); !ok {
				return fmt.Errorf("inode %d: in-inode xattrs do not fit (internal error)", in.ino)
			}
			// In-inode entries carry a zero hash, as e2fsck accepts.
			for p := disk.XattrIbodyHeaderLen; binary.LittleEndian.Uint32(area[p:]) != 0; {
				e := disk.DecodeXattrEntry(area[p:])
				binary.LittleEndian.PutUint32(area[p+12:], 0)
				p += disk.XattrEntrySize(int(e.NameLen))
			}
		}
	} else {
		inBlock = sorted
	}
	if err := v.releaseXattrBlock(in); err != nil {
		return err
	}
	if len(inBlock) > 0 {
		b := make([]byte, v.bs)
		hashes, ok := packXattrs(b, disk.XattrBlockHeaderLen, 0, inBlock)
		if !ok {
			return fmt.Errorf("inode %d: %w: xattrs need more than one %d-byte block", in.ino, ErrNoSpace, v.bs)
		}
		binary.LittleEndian.PutUint32(b[0:], disk.XattrMagic)
		binary.LittleEndian.PutUint32(b[4:], 1) // h_refcount
		binary.LittleEndian.PutUint32(b[8:], 1) // h_blocks
		binary.LittleEndian.PutUint32(b[12:], disk.XattrBlockHash(hashes))
		goal := uint64(0)
		if in.ext != nil {
			goal = in.ext.lastPhysEnd()
		}
		blk, _, err := v.allocBlocks(goal, 1)
		if err != nil {
			return err
		}
		if v.csum {
			binary.LittleEndian.PutUint32(b[16:], disk.XattrBlockChecksum(v.seed, blk, b))
		}
		if err := v.metaWriteBlock(blk, b); err != nil {
			return err
		}
		in.xattrBlk = blk
	}
	in.d.SetFileACL(in.xattrBlk)
	in.xattrDirt = false
	in.dirty = true
	return nil
}

// releaseXattrBlock drops in's reference to its external block: freed when
// in was its only user, else its refcount is decremented.
func (v *FS) releaseXattrBlock(in *inode) error {
	blk := in.xattrBlk
	if blk == 0 {
		return nil
	}
	in.xattrBlk = 0
	b := make([]byte, v.bs)
	if err := v.readBlock(blk, b); err != nil {
		return err
	}
	ref := binary.LittleEndian.Uint32(b[4:])
	if ref <= 1 {
		return v.freeBlocks(blk, 1)
	}
	binary.LittleEndian.PutUint32(b[4:], ref-1)
	if v.csum {
		binary.LittleEndian.PutUint32(b[16:], disk.XattrBlockChecksum(v.seed, blk, b))
	}
	return v.metaWriteBlock(blk, b)
}

// xattrsFit reports whether xs can be stored for an inode with extra_isize
// extra: what does not fit in the inode must fit one block. Checked when
// attributes are set, so the error comes from the call that caused it,
// not from a later flush.
func (v *FS) xattrsFit(extra uint16, xs []xattr) error {
	room := 0
	if v.inodeSize > disk.GoodOldInodeSize {
		room = v.inodeSize - disk.GoodOldInodeSize - int(extra) - disk.XattrIbodyHeaderLen - 4
	}
	blockUsed := disk.XattrBlockHeaderLen + 4
	spilled := false
	for _, x := range xs {
		sz := xattrPackSize(x)
		if !spilled && sz <= room {
			room -= sz
			continue
		}
		spilled = true
		blockUsed += sz
	}
	if blockUsed > v.bs {
		return fmt.Errorf("%w: the attributes need %d bytes beyond the inode, more than one %d-byte block", ErrNoSpace, blockUsed, v.bs)
	}
	return nil
}

// xattrSizeMax is XATTR_SIZE_MAX, the VFS's largest xattr value.
const xattrSizeMax = 64 << 10

// checkXattr refuses one attribute the format can never store, whatever
// else the inode holds: a name suffix past 255 bytes (e_name_len is one
// byte; ERANGE, as ext4_xattr_set_handle) or a value larger than one
// external block can take beside its entry (ext4lite writes no ea_inode
// values; E2BIG). A set of attributes that fit alone but not together is
// ErrNoSpace (xattrsFit).
func (v *FS) checkXattr(name string, value []byte) error {
	idx, suffix, ok := disk.XattrSplitName(name)
	if !ok {
		return fmt.Errorf("xattr %q: %w: ext4 stores only user., trusted., security. and system. attributes", name, sink.ErrUnsupported)
	}
	if strings.IndexByte(name, 0) >= 0 {
		// No Linux name holds one (they are C strings); only a
		// hand-made lisafs request could, and no tar could carry it.
		return fmt.Errorf("xattr %q: %w: a NUL in the name", name, syscall.EINVAL)
	}
	if suffix == "" && !disk.XattrWholeName(idx) {
		// "user." alone: the VFS refuses it (EINVAL), and an entry with
		// no name in a prefix namespace is corrupt.
		return fmt.Errorf("xattr %q: %w: a name after the namespace's prefix", name, errInvalid)
	}
	if len(suffix) > disk.MaxNameLen {
		return &LimitError{Op: "setxattr", What: fmt.Sprintf("name length of xattr %.40q…", name), Size: uint64(len(suffix)), Max: disk.MaxNameLen, Errno: syscall.ERANGE}
	}
	max := min(xattrSizeMax, v.bs-disk.XattrBlockHeaderLen-4-disk.XattrEntrySize(len(suffix)))
	if len(value) > max {
		return &LimitError{Op: "setxattr", What: fmt.Sprintf("value size of xattr %q", name), Size: uint64(len(value)), Max: uint64(max), Errno: syscall.E2BIG}
	}
	return nil
}

// sortedForStore orders attributes as the kernel lays them out in an area:
// by (name index, name length, name).
func sortedForStore(xs []xattr) []xattr {
	sorted := append([]xattr(nil), xs...)
	sort.SliceStable(sorted, func(i, j int) bool {
		ii, si, _ := disk.XattrSplitName(sorted[i].name)
		ij, sj, _ := disk.XattrSplitName(sorted[j].name)
		if ii != ij {
			return ii < ij
		}
		if len(si) != len(sj) {
			return len(si) < len(sj)
		}
		return si < sj
	})
	return sorted
}

// checkHeaderXattrs refuses, before anything is created, attributes a new
// inode could not store.
func (v *FS) checkHeaderXattrs(h *sink.Header) error {
	if len(h.Xattrs) == 0 {
		return nil
	}
	xs := make([]xattr, 0, len(h.Xattrs))
	for k, val := range h.Xattrs {
		if err := v.checkXattr(k, val); err != nil {
			return err
		}
		xs = append(xs, xattr{name: k, value: val})
	}
	extra := uint16(0)
	if v.inodeSize > disk.GoodOldInodeSize {
		extra = disk.InodeExtraSize
	}
	return v.xattrsFit(extra, sortedForStore(xs))
}
