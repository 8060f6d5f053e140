package erofs

import (
	"bytes"
	"encoding/binary"

	"z.gfire.dev/gvx/erofs/internal/disk"
)

// rdirent is one decoded directory entry.
type rdirent struct {
	name  string
	nid   uint64
	ftype uint8
}

// dirBlockCount is the number of directory blocks of n.
func (im *Image) dirBlockCount(n *rinode) int64 { return (n.size + im.bs - 1) >> im.bits }

// dirBlock reads directory block i of n, cut to the directory's size.
func (im *Image) dirBlock(n *rinode, i int64) ([]byte, int64, error) {
	start := i << im.bits
	m := min(im.bs, n.size-start)
	buf := make([]byte, m)
	var off int64
	if start < n.size-n.tail {
		off = n.dataOff + start
	} else {
		off = n.tailOff
	}
	if err := im.readFull(buf, off); err != nil {
		return nil, 0, err
	}
	return buf, off, nil
}

// parseDirBlock decodes one directory block; off is its image offset, for
// errors.
func parseDirBlock(blk []byte, off int64, fn func(name []byte, d *disk.Dirent) error) error {
	if len(blk) < disk.DirentSize {
		return corruptf(off, "directory block of %d bytes", len(blk))
	}
	var d disk.Dirent
	d.Unmarshal(blk)
	first := int(d.NameOff)
	if first < disk.DirentSize || first >= len(blk) || first%disk.DirentSize != 0 {
		return corruptf(off, "first name offset %d in a %d-byte directory block", first, len(blk))
	}
	count := first / disk.DirentSize
	for i := 0; i < count; i++ {
		d.Unmarshal(blk[i*disk.DirentSize:])
		start := int(d.NameOff)
		end := len(blk)
		if i+1 < count {
			end = int(binary.LittleEndian.Uint16(blk[(i+1)*disk.DirentSize+8:]))
		}
		if start < first || start >= end || end > len(blk) {
			return corruptf(off+int64(i*disk.DirentSize), "dirent %d name at %d..%d", i, start, end)
		}
		name := blk[start:end]
		if i+1 == count {
			if z := bytes.IndexByte(name, 0); z >= 0 {
				name = name[:z]
			}
		}
		if len(name) == 0 || len(name) > disk.NameLen {
			return corruptf(off+int64(start), "dirent %d has a %d-byte name", i, len(name))
		}
		if j := bytes.IndexAny(name, "/\x00"); j >= 0 {
			return corruptf(off+int64(start+j), "dirent %d name %q holds %q", i, name, name[j])
		}
		if d.FileType >= disk.FTMax {
			return corruptf(off+int64(i*disk.DirentSize)+10, "dirent %d file type %d", i, d.FileType)
		}
		if err := fn(name, &d); err != nil {
			return err
		}
	}
	return nil
}

// dirEntries calls fn on every entry of directory n, in order, checking
// that names are strictly increasing (what binary search relies on).
func (im *Image) dirEntries(n *rinode, fn func(rdirent) error) error {
	var prev []byte
	for i := range im.dirBlockCount(n) {
		blk, off, err := im.dirBlock(n, i)
		if err != nil {
			return err
		}
		err = parseDirBlock(blk, off, func(name []byte, d *disk.Dirent) error {
			if prev != nil && bytes.Compare(prev, name) >= 0 {
				return corruptf(off, "directory %d: names out of order (%q after %q)", n.nid, name, prev)
			}
			prev = append(prev[:0], name...)
			return fn(rdirent{string(name), d.Nid, d.FileType})
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// lookup finds name in directory n by binary search over its blocks and
// then within the block, as the kernel's erofs_namei does.
func (im *Image) lookup(n *rinode, name string) (uint64, bool, error) {
	want := []byte(name)
	lo, hi := int64(0), im.dirBlockCount(n)-1
	var cand []byte
	var candOff int64
	for lo <= hi {
		mid := lo + (hi-lo)/2
		blk, off, err := im.dirBlock(n, mid)
		if err != nil {
			return 0, false, err
		}
		var first []byte
		err = parseDirBlock(blk, off, func(nm []byte, _ *disk.Dirent) error {
			first = nm
			return errStop
		})
		if err != nil && err != errStop {
			return 0, false, err
		}
		if bytes.Compare(want, first) >= 0 {
			cand, candOff = blk, off
			lo = mid + 1
		} else {
			hi = mid - 1
		}
	}
	if cand == nil {
		return 0, false, nil
	}
	var nid uint64
	found := false
	err := parseDirBlock(cand, candOff, func(nm []byte, d *disk.Dirent) error {
		if bytes.Equal(nm, want) {
			nid, found = d.Nid, true
			return errStop
		}
		return nil
	})
	if err != nil && err != errStop {
		return 0, false, err
	}
	return nid, found, nil
}

type stopError struct{}

func (stopError) Error() string { return "stop" }

var errStop error = stopError{}
