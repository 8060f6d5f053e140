package erofs

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"z.gfire.dev/gvx/erofs/internal/disk"
)

// xattrPrefixes maps EROFS's short name indexes to the prefix they stand
// for. The POSIX ACL indexes name the whole attribute: their suffix is "".
var xattrPrefixes = [...]string{
	disk.XattrIndexUser:            disk.XattrPrefixUser,
	disk.XattrIndexPosixACLAccess:  disk.XattrNamePosixACLAccess,
	disk.XattrIndexPosixACLDefault: disk.XattrNamePosixACLDefault,
	disk.XattrIndexTrusted:         disk.XattrPrefixTrusted,
	disk.XattrIndexLustre:          disk.XattrPrefixLustre,
	disk.XattrIndexSecurity:        disk.XattrPrefixSecurity,
}

// xattrSplit encodes a full xattr name as an index and the suffix stored
// on disk.
func xattrSplit(name string) (index uint8, suffix string, err error) {
	switch name {
	case disk.XattrNamePosixACLAccess:
		return disk.XattrIndexPosixACLAccess, "", nil
	case disk.XattrNamePosixACLDefault:
		return disk.XattrIndexPosixACLDefault, "", nil
	}
	for _, i := range []uint8{disk.XattrIndexUser, disk.XattrIndexTrusted, disk.XattrIndexSecurity} {
		if s, ok := strings.CutPrefix(name, xattrPrefixes[i]); ok {
			if s == "" {
				break
			}
			if len(s) > disk.XattrNameMax {
				return 0, "", fmt.Errorf("%w: xattr name %.40q… longer than %d bytes after its prefix", ErrUnsupported, name, disk.XattrNameMax)
			}
			return i, s, nil
		}
	}
	return 0, "", fmt.Errorf("%w: xattr %q (EROFS names only user.*, trusted.*, security.* and system.posix_acl_*)", ErrUnsupported, name)
}

// xattrJoin decodes an on-disk index and suffix; ok is false for an index
// this package does not know.
func xattrJoin(index uint8, suffix []byte) (string, bool) {
	if index == 0 || int(index) >= len(xattrPrefixes) {
		return "", false
	}
	return xattrPrefixes[index] + string(suffix), true
}

var le = binary.LittleEndian

// xattrs reads inode n's xattrs, shared and inline.
func (im *Image) xattrs(n *rinode) (map[string][]byte, error) {
	if n.xsize == 0 {
		return nil, nil
	}
	base := n.off + n.isize
	body := make([]byte, n.xsize) // at most 256 KiB: i_xattr_icount is 16 bits
	if err := im.readFull(body, base); err != nil {
		return nil, err
	}
	var h disk.XattrIbodyHeader
	h.Unmarshal(body)
	o := disk.XattrIbodyHeaderSize + 4*int(h.SharedCount)
	if o > len(body) {
		return nil, corruptf(base, "inode %d: %d shared xattrs in a %d-byte xattr body", n.nid, h.SharedCount, len(body))
	}
	x := map[string][]byte{}
	for i := range int(h.SharedCount) {
		id := int64(le.Uint32(body[disk.XattrIbodyHeaderSize+4*i:]))
		off := im.xattrOff + 4*id
		var eb [disk.XattrEntrySize]byte
		if err := im.readFull(eb[:], off); err != nil {
			return nil, err
		}
		var e disk.XattrEntry
		e.Unmarshal(eb[:])
		nv := make([]byte, int(e.NameLen)+int(e.ValueSize))
		if err := im.readFull(nv, off+disk.XattrEntrySize); err != nil {
			return nil, err
		}
		if err := addXattr(x, &e, nv, off); err != nil {
			return nil, err
		}
	}
	for o < len(body) {
		if len(body)-o < disk.XattrEntrySize {
			return nil, corruptf(base+int64(o), "inode %d: truncated xattr entry", n.nid)
		}
		var e disk.XattrEntry
		e.Unmarshal(body[o:])
		end := o + disk.XattrEntrySize + int(e.NameLen) + int(e.ValueSize)
		if end > len(body) {
			return nil, corruptf(base+int64(o), "inode %d: xattr entry runs past the xattr body", n.nid)
		}
		if err := addXattr(x, &e, body[o+disk.XattrEntrySize:end], base+int64(o)); err != nil {
			return nil, err
		}
		o += disk.XattrEntryLen(int(e.NameLen), int(e.ValueSize))
	}
	return x, nil
}

func addXattr(x map[string][]byte, e *disk.XattrEntry, nv []byte, off int64) error {
	if e.NameIndex&disk.XattrLongPrefix != 0 {
		return fmt.Errorf("%w: long xattr name prefixes", ErrUnsupported)
	}
	name, ok := xattrJoin(e.NameIndex, nv[:e.NameLen])
	if !ok {
		return corruptf(off, "xattr name index %d", e.NameIndex)
	}
	x[name] = bytes.Clone(nv[e.NameLen:])
	return nil
}
