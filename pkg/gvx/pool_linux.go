package gvx

import (
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FIEMAP (linux/fiemap.h); x/sys does not define it.
const (
	fsIocFiemap        = 0xC020660B // _IOWR('f', 11, struct fiemap)
	fiemapExtentLast   = 0x1
	fiemapExtentShared = 0x2000
	fiemapBatch        = 64
)

type fiemapExtent struct {
	Logical, Physical, Length uint64
	_                         [2]uint64
	Flags                     uint32
	_                         [3]uint32
}

type fiemapReq struct {
	Start, Length                               uint64
	Flags, MappedExtents, ExtentCount, Reserved uint32
	Extents                                     [fiemapBatch]fiemapExtent
}

// unsharedBytes is the data path holds that no other file shares: for a
// reflink clone, the blocks written since it was cloned; on a filesystem
// without FIEMAP (tmpfs: nothing shared) all its blocks. -1: unknown.
func unsharedBytes(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer f.Close()
	var total int64
	req := new(fiemapReq)
	for start := uint64(0); ; {
		*req = fiemapReq{Start: start, Length: ^uint64(0) - start, ExtentCount: fiemapBatch}
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIocFiemap, uintptr(unsafe.Pointer(req))); e != 0 {
			// No FIEMAP (tmpfs): such a filesystem shares no extents,
			// so what the file holds is all its own.
			var st unix.Stat_t
			if start == 0 && (e == unix.EOPNOTSUPP || e == unix.ENOTTY) && unix.Fstat(int(f.Fd()), &st) == nil {
				return st.Blocks * 512
			}
			return -1
		}
		n := min(req.MappedExtents, fiemapBatch)
		if n == 0 {
			return total
		}
		for _, x := range req.Extents[:n] {
			if x.Flags&fiemapExtentShared == 0 {
				total += int64(x.Length)
			}
			if x.Flags&fiemapExtentLast != 0 {
				return total
			}
		}
		last := req.Extents[n-1]
		start = last.Logical + last.Length
	}
}

// processGone reports whether no process pid exists.
func processGone(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return os.IsNotExist(err)
}
