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
		if err := v.writeFresh(p[done:done+int(n)], int64(start)*bs, inBlk, int64(got)*bs); err != nil {
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

// writeFresh writes p at inBlk bytes into span freshly allocated bytes at
// off, the rest of the span zeros (a freed block may hold old data). The
// whole blocks of p go to the device straight from p; only a partial first
// or last block is assembled in a block-sized scratch buffer, so an import
// neither allocates nor copies per file (a 1 MiB chunk of a large file is
// one pwrite from the caller's buffer).
func (v *FS) writeFresh(p []byte, off, inBlk, span int64) error {
	bs := int64(v.bs)
	if inBlk == 0 && int64(len(p)) == span {
		return v.writeAt(p, off)
	}
	if inBlk == 0 && int64(len(p)) <= smallWrite {
		// A small file: one pwrite of p and its zeroed tail.
		b := v.scratchBuf(span)
		clear(b[copy(b, p):])
		return v.writeAt(b, off)
	}
	// A head block with p's first bytes after inBlk zeros.
	if inBlk > 0 {
		b := v.scratchBuf(bs)
		clear(b[:inBlk])
		k := copy(b[inBlk:], p)
		clear(b[inBlk+int64(k):])
		if err := v.writeAt(b, off); err != nil {
			return err
		}
		p, off, span = p[k:], off+bs, span-bs
	}
	if full := int64(len(p)) / bs * bs; full > 0 {
		if err := v.writeAt(p[:full], off); err != nil {
			return err
		}
		p, off, span = p[full:], off+full, span-full
	}
	if span > 0 {
		b := v.scratchBuf(span)
		clear(b[copy(b, p):])
		return v.writeAt(b, off)
	}
	return nil
}

// smallWrite is the size up to which writeFresh copies a write into its
// scratch buffer rather than making two pwrites (whole blocks, tail).
const smallWrite = 64 << 10

// scratchBuf returns v's reusable buffer for writeFresh, n bytes long.
func (v *FS) scratchBuf(n int64) []byte {
	if int64(cap(v.scratch)) < n {
		v.scratch = make([]byte, max(n, int64(smallWrite)+int64(v.bs)))
	}
	return v.scratch[:n]
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
