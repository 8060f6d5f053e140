package ext4lite

import (
	"io"
	"syscall"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// maxFileBlocks bounds logical block numbers (ext4's 32-bit ee_block).
const maxFileBlocks = 1 << 32

// maxFileSize is the largest size a file of this volume may have
// (disk.MaxFileSize: the kernel's s_maxbytes).
func (v *FS) maxFileSize() uint64 {
	return disk.MaxFileSize(v.bs, v.sb.FeatureROCompat&disk.ROCompatHugeFile != 0)
}

// checkFileSize refuses a size past maxFileSize with EFBIG.
func (v *FS) checkFileSize(op string, size uint64) error {
	if max := v.maxFileSize(); size > max {
		return &LimitError{Op: op, What: "file size", Size: size, Max: max, Errno: syscall.EFBIG}
	}
	return nil
}

// readData reads len(p) bytes of in's data at off; holes and unwritten
// extents read as zeros. It stops at i_size.
func (v *FS) readData(in *inode, p []byte, off int64) (int, error) {
	size := int64(in.d.Size())
	if off >= size {
		return 0, io.EOF
	}
	if int64(len(p)) > size-off {
		p = p[:size-off]
	}
	m, err := v.loadExtents(in)
	if err != nil {
		return 0, err
	}
	bs := int64(v.bs)
	done := 0
	for done < len(p) {
		pos := off + int64(done)
		lblk := pos / bs
		if lblk >= maxFileBlocks {
			return done, corruptf(-1, in.ino, "i_size past the last addressable block")
		}
		inBlk := pos % bs
		phys, run, uninit, ok := m.lookup(uint32(lblk))
		var n int64
		if !ok || uninit {
			// A hole (or unwritten extent): zeros up to its end.
			n = int64(len(p) - done)
			if run > 0 {
				n = min(n, int64(run)*bs-inBlk)
			}
			clear(p[done : done+int(n)])
		} else {
			n = min(int64(len(p)-done), int64(run)*bs-inBlk)
			if err := v.readAt(p[done:done+int(n)], int64(phys)*bs+inBlk); err != nil {
				return done, err
			}
		}
		done += int(n)
	}
	if done < len(p) {
		return done, io.EOF
	}
	return done, nil
}

// writeData writes p at off, allocating blocks for holes. With sparse set,
// whole blocks of zeros that fall in holes are left as holes. It extends
// i_size; the caller sets times.
func (v *FS) writeData(in *inode, p []byte, off int64, sparse bool) error {
	if off < 0 {
		return errInvalid
	}
	if err := v.checkFileSize("write", uint64(off)+uint64(len(p))); err != nil {
		return err
	}
	m, err := v.loadExtents(in)
	if err != nil {
		return err
	}
	bs := int64(v.bs)
	done := 0
	for done < len(p) {
		pos := off + int64(done)
		lblk := uint32(pos / bs)
		inBlk := pos % bs
		phys, run, uninit, ok := m.lookup(lblk)
		if ok && uninit {
			return pathErr("write", "", ErrUnsupported) // unwritten extents: writing into them comes with fallocate support
		}
		if ok {
			n := min(int64(len(p)-done), int64(run)*bs-inBlk)
			if err := v.writeAt(p[done:done+int(n)], int64(phys)*bs+inBlk); err != nil {
				return err
			}
			done += int(n)
			continue
		}
		// A hole: allocate as many blocks as the rest of p needs (bounded
		// by the hole), contiguous where possible.
		need := (inBlk + int64(len(p)-done) + bs - 1) / bs
		if run > 0 {
			need = min(need, int64(run))
		}
		if sparse && inBlk == 0 && int64(len(p)-done) >= bs && isZero(p[done:done+int(bs)]) {
			done += int(bs)
			continue
		}
		if sparse {
			// Allocate only up to the next all-zero block.
			for k := int64(1); k < need; k++ {
				s := done + int(k*bs-inBlk)
				if s+int(bs) <= len(p) && isZero(p[s:s+int(bs)]) {
					need = k
					break
				}
			}
		}
		goal := m.lastPhysEnd()
		if goal == 0 {
			goal = v.allocCursor
		}
		start, got, err := v.allocBlocks(goal, int(min(need, disk.ExtentInitMaxLen)))
		if err != nil {
			return err
		}
		if max := v.opts.maxExtents(); len(m.ext) >= max && !m.merges(lblk, start, uint32(got)) {
			// Past the limit the reader enforces (extent.go): a file
			// this volume could not read back with the same options.
			if err := v.freeBlocks(start, uint64(got)); err != nil {
				return err
			}
			return &LimitError{Op: "write", What: "extent count (Options.MaxExtents) of the file", Size: uint64(len(m.ext) + 1), Max: uint64(max), Errno: syscall.EFBIG}
		}
		m.insert(lblk, start, uint32(got))
		// Write the covered span; zero the parts of the first and last
		// blocks that p does not cover.
		span := int64(got)*bs - inBlk
		n := min(int64(len(p)-done), span)
		if err := v.writeNew(p[done:done+int(n)], int64(start)*bs, inBlk, int64(got)*bs); err != nil {
			return err
		}
		done += int(n)
	}
	if end := uint64(off) + uint64(len(p)); end > in.d.Size() {
		in.d.SetSize(end)
	}
	in.dirty = true
	return nil
}

// writeNew writes src into size bytes of newly allocated blocks at
// devOff, src starting inBlk bytes in; the bytes src does not cover are
// zeroed (they are read back as the file's holes and tail). When src
// starts at a block boundary its whole blocks go to the device as they
// are (a write of a MiB, dd's, is one pwrite and no copy) and only a
// partial last block is staged in a zeroed buffer.
func (v *FS) writeNew(src []byte, devOff, inBlk, size int64) error {
	if inBlk != 0 {
		buf := make([]byte, size)
		copy(buf[inBlk:], src)
		return v.writeAt(buf, devOff)
	}
	bs := int64(v.bs)
	whole := int64(len(src)) / bs * bs
	if whole > 0 {
		if err := v.writeAt(src[:whole], devOff); err != nil {
			return err
		}
	}
	if whole == size {
		return nil
	}
	tail := make([]byte, size-whole)
	copy(tail, src[whole:])
	return v.writeAt(tail, devOff+whole)
}

// truncateData sets i_size, freeing blocks past it (and zeroing the tail of
// a partial last block so a later extension reads zeros).
func (v *FS) truncateData(in *inode, size uint64) error {
	if err := v.checkFileSize("truncate", size); err != nil {
		return err
	}
	m, err := v.loadExtents(in)
	if err != nil {
		return err
	}
	bs := uint64(v.bs)
	keep := (size + bs - 1) / bs
	if keep < maxFileBlocks {
		for _, r := range m.truncate(uint32(keep)) {
			if err := v.freeBlocks(r[0], r[1]); err != nil {
				return err
			}
		}
	}
	if size%bs != 0 && size < in.d.Size() {
		if phys, _, uninit, ok := m.lookup(uint32(size / bs)); ok && !uninit {
			z := make([]byte, bs-size%bs)
			if err := v.writeAt(z, int64(phys*bs+size%bs)); err != nil {
				return err
			}
		}
	}
	in.d.SetSize(size)
	in.dirty = true
	return nil
}

// updateBlockCount recomputes i_blocks from the extent map, tree blocks and
// the xattr block.
func (v *FS) updateBlockCount(in *inode) error {
	var blocks uint64
	if usesBlockData(in) {
		m, err := v.loadExtents(in)
		if err != nil {
			return err
		}
		blocks = m.dataBlocks() + uint64(len(m.tree))
	}
	if in.xattrBlk != 0 {
		blocks++
	}
	in.d.SetBlocks(blocks * uint64(v.bs/512))
	return nil
}

// usesBlockData reports whether in's i_block holds an extent tree.
func usesBlockData(in *inode) bool {
	switch in.fileType() {
	case disk.ModeReg, disk.ModeDir:
		return true
	case disk.ModeSymlink:
		return in.d.Flags&disk.FlagExtents != 0
	}
	return false
}
