package ext4lite

import (
	"io"
)

// Device is the byte store a volume lives in: normally an *os.File, in
// tests a memfile.
type Device interface {
	io.ReaderAt
	io.WriterAt
}

// syncer is implemented by devices that can flush to stable storage.
type syncer interface{ Sync() error }

// Writes come in two kinds. File data goes straight to the device
// (writeAt, writeBlock): ordered mode, data reaches the file before the
// metadata that makes it reachable. Metadata (inodes, directories, extent
// tree and xattr blocks, bitmaps, descriptors, the superblock) is staged
// block by block in v.meta (metaWriteAt, metaWriteBlock) and reaches the
// file only through a journal transaction at the next flush, so a crash
// leaves either the old or the new metadata, never a mix. Reads see the
// staged blocks.

// readAt reads len(p) bytes at off, staged metadata included, or fails
// with a FormatError: a read past the end means the volume is truncated.
func (v *FS) readAt(p []byte, off int64) error {
	n, err := v.dev.ReadAt(p, off)
	if n != len(p) {
		if err == io.EOF || err == nil {
			return corruptf(off, 0, "read of %d bytes past the end of the volume file", len(p))
		}
		return err
	}
	if len(v.meta) > 0 {
		bs := int64(v.bs)
		for blk := off / bs; blk*bs < off+int64(len(p)); blk++ {
			if b, ok := v.meta[uint64(blk)]; ok {
				lo, hi := max(blk*bs, off), min((blk+1)*bs, off+int64(len(p)))
				copy(p[lo-off:hi-off], b[lo-blk*bs:hi-blk*bs])
			}
		}
	}
	return nil
}

// writeAt writes file data (or the journal) straight to the device.
func (v *FS) writeAt(p []byte, off int64) error {
	if v.readOnly {
		return ErrReadOnly
	}
	_, err := v.dev.WriteAt(p, off)
	return err
}

func (v *FS) readBlock(blk uint64, p []byte) error {
	if blk >= v.blocksCount {
		return corruptf(-1, 0, "block %d is past the end of the filesystem (%d blocks)", blk, v.blocksCount)
	}
	return v.readAt(p[:v.bs], int64(blk)*int64(v.bs))
}

func (v *FS) writeBlock(blk uint64, p []byte) error {
	v.checkWriteBlock(blk)
	return v.writeAt(p[:v.bs], int64(blk)*int64(v.bs))
}

func (v *FS) checkWriteBlock(blk uint64) {
	if blk >= v.blocksCount {
		panic("ext4lite: write to a block past the end of the filesystem") // allocator invariant broken
	}
}

// metaWriteBlock stages one metadata block.
func (v *FS) metaWriteBlock(blk uint64, p []byte) error {
	if v.readOnly {
		return ErrReadOnly
	}
	v.checkWriteBlock(blk)
	b, ok := v.meta[blk]
	if !ok {
		b = make([]byte, v.bs)
		v.meta[blk] = b
	}
	copy(b, p[:v.bs])
	return nil
}

// metaWriteAt stages metadata bytes at any offset (inode slots, the
// superblock, descriptor tables), reading the rest of each block first.
func (v *FS) metaWriteAt(p []byte, off int64) error {
	if v.readOnly {
		return ErrReadOnly
	}
	bs := int64(v.bs)
	for blk := off / bs; blk*bs < off+int64(len(p)); blk++ {
		b, ok := v.meta[uint64(blk)]
		if !ok {
			v.checkWriteBlock(uint64(blk))
			b = make([]byte, v.bs)
			if err := v.readAt(b, blk*bs); err != nil {
				return err
			}
			v.meta[uint64(blk)] = b
		}
		lo, hi := max(blk*bs, off), min((blk+1)*bs, off+int64(len(p)))
		copy(b[lo-blk*bs:hi-blk*bs], p[lo-off:hi-off])
	}
	return nil
}
