package ext4lite

import (
	"time"
)

// Options control opening and creating volumes. The zero value (or nil) is
// valid.
type Options struct {
	// ReadOnly opens without writing anything, not even the in-use mark.
	ReadOnly bool
	// Now returns the time used for changes that carry no time of their own
	// (directory mtimes when entries change, ctime). Default time.Now.
	Now func() time.Time

	// Limits on what one file's extent tree may make ext4lite read and
	// hold (a hostile volume can describe trees far larger than any real
	// file's). Past either, the file is refused with a *FormatError.
	//
	// MaxExtentNodes bounds the index and leaf blocks read for one file;
	// default DefaultMaxExtentNodes.
	MaxExtentNodes int
	// MaxExtents bounds the extents (leaf entries) held for one file;
	// default DefaultMaxExtents. A write that would fragment a file past
	// it fails with EFBIG (a *LimitError), so every file ext4lite writes
	// reads back with the same options.
	MaxExtents int
	// MaxDirSize bounds the bytes of one directory ext4lite reads (its
	// i_size); default DefaultMaxDirSize. A larger directory is refused
	// with EFBIG (a *LimitError) before any of it is read: a hostile
	// volume's directory can claim terabytes of blocks.
	MaxDirSize int64

	// NoSync skips the device flushes (fsync(2) of the volume file) of
	// every sync but Close's: a sync still commits the journal and writes
	// its blocks with pwrite, so a process killed afterwards (the host's
	// page cache keeps every completed write, in order) leaves a volume
	// that recovers to it; only a host crash or power loss can lose what
	// was synced since the last Close. For volumes whose contents are
	// thrown away with their user (an RL episode's scratch volume).
	NoSync bool
}

// Default limits. A file of DefaultMaxExtents extents is at least 8 GiB
// of 4 KiB blocks fragmented block by block; its tree needs ~6,200 leaf
// blocks, far below DefaultMaxExtentNodes, and ~48 MiB in memory.
const (
	DefaultMaxExtentNodes = 1 << 15
	DefaultMaxExtents     = 1 << 21
	// DefaultMaxDirSize is 1 GiB of directory blocks: some 10 million
	// entries of 80-byte names, far past what Docker layers hold.
	DefaultMaxDirSize = 1 << 30
)

func (o *Options) maxDirSize() uint64 {
	if o.MaxDirSize > 0 {
		return uint64(o.MaxDirSize)
	}
	return DefaultMaxDirSize
}

func (o *Options) maxExtentNodes() int {
	if o.MaxExtentNodes > 0 {
		return o.MaxExtentNodes
	}
	return DefaultMaxExtentNodes
}

func (o *Options) maxExtents() int {
	if o.MaxExtents > 0 {
		return o.MaxExtents
	}
	return DefaultMaxExtents
}

func (o *Options) orDefault() Options {
	var r Options
	if o != nil {
		r = *o
	}
	return r
}

func (o *Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}
