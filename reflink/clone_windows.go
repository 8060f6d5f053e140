package reflink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/windows"
)

const (
	// fileSupportsBlockRefcounting is FILE_SUPPORTS_BLOCK_REFCOUNTING, the
	// volume flag of filesystems that implement block cloning (ReFS v2+).
	fileSupportsBlockRefcounting = 0x08000000
	// maxCloneChunk keeps each FSCTL_DUPLICATE_EXTENTS_TO_FILE call under
	// the documented 4 GiB limit; it is a multiple of every cluster size.
	maxCloneChunk = 1 << 31
	// errorBlockTooManyReferences is ERROR_BLOCK_TOO_MANY_REFERENCES: a
	// cluster is already shared by as many files as ReFS allows.
	errorBlockTooManyReferences = windows.Errno(347)
)

// cloneNew creates the file name as a clone of src, following the rules of
// Windows block cloning: same volume, destination sparse if the source is,
// same integrity-stream setting, destination extended to its final length
// first, cluster-aligned ranges under 4 GiB each. finish sets the mode
// and syncs (settled is false).
func cloneNew(src *os.File, name string, perm fs.FileMode, sync bool) (settled bool, late func(sync bool) error, err error) {
	return false, nil, cloneNewFile(src, name)
}

func cloneNewFile(src *os.File, name string) error {
	sh := windows.Handle(src.Fd())
	var flags uint32
	if err := windows.GetVolumeInformationByHandle(sh, nil, 0, nil, nil, &flags, nil, 0); err == nil &&
		flags&fileSupportsBlockRefcounting == 0 {
		return &fs.PathError{Op: "clone", Path: name, Err: windows.ERROR_NOT_SUPPORTED}
	}
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(sh, &info); err != nil {
		return err
	}
	size := int64(info.FileSizeHigh)<<32 | int64(info.FileSizeLow)

	df, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = cloneInto(df, sh, size, info.FileAttributes&windows.FILE_ATTRIBUTE_SPARSE_FILE != 0)
	if cerr := df.Close(); err == nil {
		err = cerr
	}
	return err
}

func cloneInto(df *os.File, sh windows.Handle, size int64, sparse bool) error {
	dh := windows.Handle(df.Fd())
	var ret uint32
	if sparse {
		if err := windows.DeviceIoControl(dh, windows.FSCTL_SET_SPARSE, nil, 0, nil, 0, &ret, nil); err != nil {
			return &fs.PathError{Op: "FSCTL_SET_SPARSE", Path: df.Name(), Err: err}
		}
	}
	// FSCTL_GET_INTEGRITY_INFORMATION_BUFFER: ChecksumAlgorithm u16,
	// Reserved u16, Flags u32, ChecksumChunkSizeInBytes u32,
	// ClusterSizeInBytes u32. Only ReFS answers it, with its cluster size.
	var gi [16]byte
	if err := windows.DeviceIoControl(sh, windows.FSCTL_GET_INTEGRITY_INFORMATION, nil, 0, &gi[0], uint32(len(gi)), &ret, nil); err != nil {
		return &fs.PathError{Op: "FSCTL_GET_INTEGRITY_INFORMATION", Path: df.Name(), Err: err}
	}
	cluster := int64(binary.LittleEndian.Uint32(gi[12:]))
	if cluster <= 0 || cluster&(cluster-1) != 0 || maxCloneChunk%cluster != 0 {
		return fmt.Errorf("%s: unexpected cluster size %d", df.Name(), cluster)
	}
	// FSCTL_SET_INTEGRITY_INFORMATION_BUFFER: ChecksumAlgorithm u16,
	// Reserved u16, Flags u32.
	var si [8]byte
	copy(si[0:2], gi[0:2])
	copy(si[4:8], gi[4:8])
	if err := windows.DeviceIoControl(dh, windows.FSCTL_SET_INTEGRITY_INFORMATION, &si[0], uint32(len(si)), nil, 0, &ret, nil); err != nil {
		return &fs.PathError{Op: "FSCTL_SET_INTEGRITY_INFORMATION", Path: df.Name(), Err: err}
	}
	if err := df.Truncate(size); err != nil {
		return err
	}
	return duplicateExtents(dh, sh, 0, 0, (size+cluster-1)/cluster*cluster, df.Name())
}

// duplicateExtents issues FSCTL_DUPLICATE_EXTENTS_TO_FILE in chunks.
func duplicateExtents(dh, sh windows.Handle, dstOff, srcOff, n int64, name string) error {
	for n > 0 {
		chunk := min(n, maxCloneChunk)
		// DUPLICATE_EXTENTS_DATA: FileHandle HANDLE (padded to 8 bytes on
		// 32-bit), SourceFileOffset, TargetFileOffset, ByteCount (LARGE_INTEGER).
		var in [32]byte
		binary.LittleEndian.PutUint64(in[0:], uint64(sh))
		binary.LittleEndian.PutUint64(in[8:], uint64(srcOff))
		binary.LittleEndian.PutUint64(in[16:], uint64(dstOff))
		binary.LittleEndian.PutUint64(in[24:], uint64(chunk))
		var ret uint32
		if err := windows.DeviceIoControl(dh, windows.FSCTL_DUPLICATE_EXTENTS_TO_FILE, &in[0], uint32(len(in)), nil, 0, &ret, nil); err != nil {
			return &fs.PathError{Op: "FSCTL_DUPLICATE_EXTENTS_TO_FILE", Path: name, Err: err}
		}
		n -= chunk
		srcOff += chunk
		dstOff += chunk
	}
	return nil
}

// CloneRange makes n bytes of dst at dstOff share the extents of src at
// srcOff (Windows FSCTL_DUPLICATE_EXTENTS_TO_FILE, Linux FICLONERANGE). The
// offsets and n must be multiples of the cluster size, except that a range
// may end at src's end of file; dst must already be long enough. n == 0
// means "to the end of src". It never copies: a filesystem that cannot
// clone gives an error wrapping ErrNotSupported.
func CloneRange(dst, src *os.File, dstOff, srcOff, n int64) error {
	if dstOff < 0 || srcOff < 0 || n < 0 {
		return fmt.Errorf("reflink: negative offset or length")
	}
	if n == 0 {
		fi, err := src.Stat()
		if err != nil {
			return err
		}
		n = fi.Size() - srcOff
	}
	err := duplicateExtents(windows.Handle(dst.Fd()), windows.Handle(src.Fd()), dstOff, srcOff, n, dst.Name())
	if err == nil {
		return nil
	}
	if isNotSupported(err) {
		return notSupported(src.Name(), dst.Name(), err)
	}
	return wrapErr(src.Name(), dst.Name(), err)
}

func isNotSupported(err error) bool {
	return errors.Is(err, windows.ERROR_NOT_SUPPORTED) || errors.Is(err, windows.ERROR_INVALID_FUNCTION) ||
		errors.Is(err, windows.ERROR_NOT_SAME_DEVICE) || errors.Is(err, errorBlockTooManyReferences)
}

func isCrossDevice(err error) bool { return errors.Is(err, windows.ERROR_NOT_SAME_DEVICE) }

func isNoSpace(err error) bool {
	return errors.Is(err, windows.ERROR_DISK_FULL) || errors.Is(err, windows.ERROR_HANDLE_DISK_FULL)
}

func fsTypeName(path string) string {
	p, err := windows.UTF16PtrFromString(filepath.VolumeName(path) + `\`)
	if err != nil {
		return ""
	}
	var name [windows.MAX_PATH + 1]uint16
	if err := windows.GetVolumeInformation(p, nil, 0, nil, nil, nil, &name[0], uint32(len(name))); err != nil {
		return ""
	}
	return windows.UTF16ToString(name[:])
}

// copyData copies size bytes of src into dst leaving all-zero blocks as
// holes (dst is marked sparse first so they stay holes).
func copyData(dst, src *os.File, size int64, mayShare bool) (int64, error) {
	var ret uint32
	// Best effort: FAT and some network filesystems have no sparse files.
	_ = windows.DeviceIoControl(windows.Handle(dst.Fd()), windows.FSCTL_SET_SPARSE, nil, 0, nil, 0, &ret, nil)
	if err := dst.Truncate(size); err != nil {
		return 0, err
	}
	return copySkipZeros(dst, src, size)
}
