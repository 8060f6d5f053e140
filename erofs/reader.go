package erofs

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"strings"
	"time"

	"z.gfire.dev/gvx/erofs/internal/disk"
	"z.gfire.dev/gvx/sink"
)

// Image is an open EROFS image. It validates the superblock at Open and
// every inode, directory block and xattr as it is reached, so hostile bytes
// give errors wrapping ErrCorrupt (or ErrUnsupported), never a panic, a
// hang or an allocation larger than a block or one xattr body. It reads
// FLAT_PLAIN and FLAT_INLINE data of any block size from 512 B to 64 KiB;
// compressed and chunk-based files are refused with ErrUnsupported when
// opened. It is safe for concurrent use if r is.
type Image struct {
	r        io.ReaderAt
	size     int64
	sb       disk.Super
	bits     uint
	bs       int64
	metaOff  int64
	xattrOff int64
	opts     ReaderOptions
}

var _ sink.Source = (*Image)(nil)

// Open validates the superblock of the image held by r (size bytes) and
// its root inode, with the default ReaderOptions.
func Open(r io.ReaderAt, size int64) (*Image, error) {
	return OpenOptions(r, size, ReaderOptions{})
}

// OpenOptions is Open with the reader's limits given.
func OpenOptions(r io.ReaderAt, size int64, o ReaderOptions) (*Image, error) {
	im := &Image{r: r, size: size, opts: o}
	if size < disk.SuperOffset+disk.SuperSize {
		return nil, corruptf(0, "image of %d bytes is smaller than a superblock", size)
	}
	var buf [disk.SuperSize]byte
	if err := im.readFull(buf[:], disk.SuperOffset); err != nil {
		return nil, err
	}
	sb := &im.sb
	sb.Unmarshal(buf[:])
	if sb.Magic != disk.SuperMagicV1 {
		return nil, corruptf(disk.SuperOffset, "bad magic %#x, not an EROFS image", sb.Magic)
	}
	if sb.BlkSzBits < 9 || sb.BlkSzBits > 16 {
		return nil, corruptf(disk.SuperOffset+12, "block size 2^%d out of range", sb.BlkSzBits)
	}
	im.bits = uint(sb.BlkSzBits)
	im.bs = 1 << im.bits
	if disk.CompatFeature(sb.FeatureCompat)&disk.CompatSBChksum != 0 {
		n := im.bs
		if n > disk.SuperOffset {
			n -= disk.SuperOffset
		}
		if size-disk.SuperOffset < n {
			return nil, corruptf(disk.SuperOffset, "image too small for its checksummed superblock block")
		}
		blk := make([]byte, n)
		if err := im.readFull(blk, disk.SuperOffset); err != nil {
			return nil, err
		}
		clear(blk[4:8])
		if got := ^crc32.Update(0, castagnoli, blk); got != sb.Checksum {
			return nil, corruptf(disk.SuperOffset+4, "superblock checksum %#x, computed %#x", sb.Checksum, got)
		}
	}
	if f := disk.IncompatFeature(sb.FeatureIncompat) &^ disk.IncompatSupportedByGvx; f != 0 {
		return nil, fmt.Errorf("%w: incompatible features %#x", ErrUnsupported, uint32(f))
	}
	if sb.ExtraDevices != 0 {
		return nil, fmt.Errorf("%w: %d extra devices", ErrUnsupported, sb.ExtraDevices)
	}
	if int64(sb.BlocksLo) > size>>im.bits {
		return nil, corruptf(disk.SuperOffset+36, "%d blocks of %d bytes but the image has %d bytes (truncated?)", sb.BlocksLo, im.bs, size)
	}
	if sb.MetaBlkAddr >= sb.BlocksLo {
		return nil, corruptf(disk.SuperOffset+40, "metadata block %d beyond the %d blocks", sb.MetaBlkAddr, sb.BlocksLo)
	}
	if sb.XattrBlkAddr > sb.BlocksLo {
		return nil, corruptf(disk.SuperOffset+44, "shared xattr block %d beyond the %d blocks", sb.XattrBlkAddr, sb.BlocksLo)
	}
	// From here on nothing reads past the blocks the superblock declares.
	im.size = int64(sb.BlocksLo) << im.bits
	im.metaOff = int64(sb.MetaBlkAddr) << im.bits
	im.xattrOff = int64(sb.XattrBlkAddr) << im.bits
	root, err := im.inode(uint64(sb.RootNid))
	if err != nil {
		return nil, fmt.Errorf("root inode: %w", err)
	}
	if root.mode&sink.TypeMask != sink.TypeDir {
		return nil, corruptf(root.off, "root inode is not a directory (mode %#o)", root.mode)
	}
	return im, nil
}

// BlockSize returns the image's block size in bytes.
func (im *Image) BlockSize() int { return int(im.bs) }

// Blocks returns the number of blocks the superblock declares.
func (im *Image) Blocks() int64 { return int64(im.sb.BlocksLo) }

// Inodes returns the superblock's inode count.
func (im *Image) Inodes() uint64 { return im.sb.Inos }

// Epoch returns the image's base time (mtime of compact inodes).
func (im *Image) Epoch() time.Time { return time.Unix(int64(im.sb.Epoch), int64(im.sb.FixedNsec%1e9)) }

// RootNid returns the root directory's nid.
func (im *Image) RootNid() uint64 { return uint64(im.sb.RootNid) }

// readFull reads exactly len(p) bytes at off, which must lie in the image.
func (im *Image) readFull(p []byte, off int64) error {
	if off < 0 || off > im.size || int64(len(p)) > im.size-off {
		return corruptf(off, "%d bytes at %#x lie outside the %d-byte image", len(p), off, im.size)
	}
	n, err := im.r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return corruptf(off, "image ends inside a %d-byte record", len(p))
	}
	return fmt.Errorf("erofs: reading image at %#x: %w", off, err)
}

// rinode is a decoded, checked inode.
type rinode struct {
	nid     uint64
	off     int64 // byte offset of the inode
	mode    uint32
	uid     uint32
	gid     uint32
	nlink   uint32
	size    int64
	mtime   time.Time
	layout  int
	u       uint32
	isize   int64
	xsize   int64
	dataOff int64 // offset of the first data block
	nblocks int64 // blocks at dataOff
	tail    int64 // inline bytes
	tailOff int64
}

func (n *rinode) typ() uint32 { return n.mode & sink.TypeMask }

// inode reads and checks the inode nid.
func (im *Image) inode(nid uint64) (*rinode, error) {
	if nid >= uint64(im.size-im.metaOff)>>disk.SlotBits {
		return nil, corruptf(im.metaOff, "nid %d beyond the image", nid)
	}
	n := &rinode{nid: nid, off: im.metaOff + int64(nid<<disk.SlotBits)}
	var buf [disk.InodeExtendedSize]byte
	if err := im.readFull(buf[:2], n.off); err != nil {
		return nil, err
	}
	format := uint16(buf[0]) | uint16(buf[1])<<8
	if format&^disk.FormatAll != 0 {
		return nil, fmt.Errorf("%w: inode %d has format bits %#x", ErrUnsupported, nid, format)
	}
	var icount uint16
	var blkaddr uint32
	nlink1 := format&(1<<4) != 0 // EROFS_I_NLINK_1_BIT (non-directories)
	switch format & disk.FormatVersionMask {
	case disk.LayoutCompact:
		n.isize = disk.InodeCompactSize
		if err := im.readFull(buf[:disk.InodeCompactSize], n.off); err != nil {
			return nil, err
		}
		var ic disk.InodeCompact
		ic.Unmarshal(buf[:])
		icount, n.mode, n.size, n.u = ic.XattrIcount, uint32(ic.Mode), int64(ic.Size), ic.U
		n.uid, n.gid, n.nlink = uint32(ic.UID), uint32(ic.GID), uint32(ic.Nlink)
		n.mtime = time.Unix(int64(im.sb.Epoch)+int64(ic.Mtime), int64(im.sb.FixedNsec%1e9))
		if nlink1 && n.mode&sink.TypeMask != sink.TypeDir {
			n.nlink = 1
		}
	default:
		n.isize = disk.InodeExtendedSize
		if err := im.readFull(buf[:], n.off); err != nil {
			return nil, err
		}
		var ie disk.InodeExtended
		ie.Unmarshal(buf[:])
		if ie.Size > math.MaxInt64 {
			return nil, corruptf(n.off+8, "inode %d size %d", nid, ie.Size)
		}
		if ie.MtimeNsec >= 1e9 {
			return nil, corruptf(n.off+40, "inode %d mtime nanoseconds %d", nid, ie.MtimeNsec)
		}
		icount, n.mode, n.size, n.u = ie.XattrIcount, uint32(ie.Mode), int64(ie.Size), ie.U
		n.uid, n.gid, n.nlink = ie.UID, ie.GID, ie.Nlink
		n.mtime = time.Unix(int64(ie.Mtime), int64(ie.MtimeNsec))
	}
	blkaddr = n.u
	switch n.typ() {
	case sink.TypeReg, sink.TypeDir, sink.TypeSymlink:
	case sink.TypeChar, sink.TypeBlock, sink.TypeFifo, sink.TypeSocket:
		n.size, blkaddr = 0, 0 // i_u is rdev; no data
	default:
		return nil, corruptf(n.off+4, "inode %d has file type %#o", nid, n.typ())
	}
	if icount == 1 {
		return nil, corruptf(n.off+2, "inode %d has an xattr header without xattrs", nid)
	}
	n.xsize = int64(disk.XattrIbodySize(icount))
	if n.off+n.isize+n.xsize > im.size {
		return nil, corruptf(n.off, "inode %d runs past the image", nid)
	}
	n.layout = int(format>>disk.FormatDataLayoutBit) & disk.FormatDataLayoutMask
	// Flat layouts have no holes: the data lies in the image, so a size
	// past the image's blocks is corrupt (and 2^63-1 would overflow the
	// block count below, skipping the data-range check).
	if maxSize := int64(im.sb.BlocksLo) << im.bits; (n.layout == disk.FlatPlain || n.layout == disk.FlatInline) && n.size > maxSize {
		return nil, corruptf(n.off+8, "inode %d size %d is past the image's %d bytes of blocks", nid, n.size, maxSize)
	}
	switch n.layout {
	case disk.FlatPlain:
		n.nblocks = (n.size + im.bs - 1) >> im.bits
	case disk.FlatInline:
		n.tail = n.size & (im.bs - 1)
		n.nblocks = n.size >> im.bits
		n.tailOff = n.off + n.isize + n.xsize
		if n.tail == 0 && n.size > 0 {
			return nil, corruptf(n.off, "inode %d is FLAT_INLINE without a tail", nid)
		}
		if n.tailOff&(im.bs-1)+n.tail > im.bs || n.tailOff+n.tail > im.size {
			return nil, corruptf(n.off, "inode %d inline data crosses a block boundary", nid)
		}
	case disk.CompressedFull, disk.CompressedCompact, disk.ChunkBased:
		if n.typ() == sink.TypeReg || n.typ() == sink.TypeDir || n.typ() == sink.TypeSymlink {
			return nil, fmt.Errorf("%w: inode %d uses data layout %d (compressed or chunked)", ErrUnsupported, nid, n.layout)
		}
	default:
		return nil, corruptf(n.off, "inode %d has unknown data layout %d", nid, n.layout)
	}
	if n.nblocks > 0 {
		if int64(blkaddr)+n.nblocks > int64(im.sb.BlocksLo) {
			return nil, corruptf(n.off+16, "inode %d data blocks %d+%d beyond the %d blocks", nid, blkaddr, n.nblocks, im.sb.BlocksLo)
		}
		n.dataOff = int64(blkaddr) << im.bits
	}
	return n, nil
}

// resolve walks p from the root without following symlinks.
func (im *Image) resolve(op, p string) (*rinode, error) {
	if err := checkPath(op, p); err != nil {
		return nil, err
	}
	n, err := im.inode(uint64(im.sb.RootNid))
	if err != nil {
		return nil, err
	}
	if p == "." {
		return n, nil
	}
	for elem := range strings.SplitSeq(p, "/") {
		switch n.typ() {
		case sink.TypeDir:
		case sink.TypeSymlink:
			return nil, &fs.PathError{Op: op, Path: p, Err: sink.ErrSymlinkInPath}
		default:
			return nil, &fs.PathError{Op: op, Path: p, Err: errNotDir}
		}
		nid, ok, err := im.lookup(n, elem)
		if err != nil {
			return nil, &fs.PathError{Op: op, Path: p, Err: err}
		}
		if !ok {
			return nil, &fs.PathError{Op: op, Path: p, Err: fs.ErrNotExist}
		}
		if n, err = im.inode(nid); err != nil {
			return nil, &fs.PathError{Op: op, Path: p, Err: err}
		}
	}
	return n, nil
}

// Lstat implements sink.Source. Ino is the nid: hard links share it.
func (im *Image) Lstat(p string) (*sink.Header, error) {
	n, err := im.resolve("lstat", p)
	if err != nil {
		return nil, err
	}
	h := &sink.Header{
		Path: p, Mode: n.mode, UID: n.uid, GID: n.gid,
		Mtime: n.mtime, Atime: n.mtime, Ctime: n.mtime, // as the kernel reports them
		Ino: n.nid, Nlink: n.nlink,
	}
	switch n.typ() {
	case sink.TypeReg:
		h.Size = n.size
	case sink.TypeSymlink:
		if h.Linkname, err = im.readlink(n); err != nil {
			return nil, &fs.PathError{Op: "lstat", Path: p, Err: err}
		}
	case sink.TypeChar, sink.TypeBlock:
		h.Devmajor, h.Devminor = disk.DecodeDev(n.u)
	}
	if h.Xattrs, err = im.xattrs(n); err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: p, Err: err}
	}
	return h, nil
}

func (im *Image) readlink(n *rinode) (string, error) {
	if n.size == 0 || n.size >= 4096 { // PATH_MAX, as the kernel's page_get_link allows
		return "", corruptf(n.off+8, "symlink inode %d has a %d-byte target", n.nid, n.size)
	}
	b := make([]byte, n.size)
	if err := im.readData(n, b, 0); err != nil {
		return "", err
	}
	return string(b), nil
}

// readData fills p with n's data from offset off.
func (im *Image) readData(n *rinode, p []byte, off int64) error {
	_, err := io.ReadFull(io.NewSectionReader(im.dataReader(n), off, int64(len(p))), p)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		return corruptf(n.off, "inode %d data ends early", n.nid)
	}
	return err
}

// dataReader returns n's data as one ReaderAt.
func (im *Image) dataReader(n *rinode) io.ReaderAt {
	body := n.size - n.tail
	return &dataAt{im: im, n: n, body: body}
}

type dataAt struct {
	im   *Image
	n    *rinode
	body int64 // bytes in blocks; the rest is the inline tail
}

func (d *dataAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fs.ErrInvalid
	}
	if off >= d.n.size {
		return 0, io.EOF
	}
	want := len(p)
	if rem := d.n.size - off; int64(want) > rem {
		p = p[:rem]
	}
	done := 0
	if off < d.body {
		m := min(int64(len(p)), d.body-off)
		if err := d.im.readFull(p[:m], d.n.dataOff+off); err != nil {
			return 0, err
		}
		done = int(m)
	}
	if done < len(p) {
		if err := d.im.readFull(p[done:], d.n.tailOff+off+int64(done)-d.body); err != nil {
			return done, err
		}
		done = len(p)
	}
	if done < want {
		return done, io.EOF
	}
	return done, nil
}

// Open implements sink.Source.
func (im *Image) Open(p string) (io.ReadCloser, error) {
	n, err := im.resolve("open", p)
	if err != nil {
		return nil, err
	}
	if n.typ() != sink.TypeReg {
		return nil, &fs.PathError{Op: "open", Path: p, Err: fmt.Errorf("not a regular file: %w", fs.ErrInvalid)}
	}
	// Seekable and an io.ReaderAt: exporters and checkers read at offsets.
	return struct {
		*io.SectionReader
		io.Closer
	}{io.NewSectionReader(im.dataReader(n), 0, n.size), io.NopCloser(nil)}, nil
}

// ReadDir implements sink.Source: the names in p, without "." and "..",
// sorted.
func (im *Image) ReadDir(p string) ([]string, error) {
	n, err := im.resolve("readdir", p)
	if err != nil {
		return nil, err
	}
	if n.typ() != sink.TypeDir {
		return nil, &fs.PathError{Op: "readdir", Path: p, Err: errNotDir}
	}
	var names []string
	max := im.opts.maxDirEntries()
	err = im.dirEntries(n, func(e rdirent) error {
		if e.name != "." && e.name != ".." {
			if len(names) >= max {
				return &LimitError{What: fmt.Sprintf("entries of directory %d", n.nid), Limit: int64(max)}
			}
			names = append(names, e.name)
		}
		return nil
	})
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: p, Err: err}
	}
	return names, nil
}
