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

// readFull reads len(p) bytes at off or fails with a FormatError: a read
// past the end of the device means the volume is truncated or corrupt.
func (v *FS) readAt(p []byte, off int64) error {
	n, err := v.dev.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == io.EOF || err == nil {
		return corruptf(off, 0, "read of %d bytes past the end of the volume file", len(p))
	}
	return err
}

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
	if blk >= v.blocksCount || blk == 0 && v.firstDataBlock == 0 {
		panic("ext4lite: write to block outside the data area") // allocator invariant broken
	}
	return v.writeAt(p[:v.bs], int64(blk)*int64(v.bs))
}
