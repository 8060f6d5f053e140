package jbd2

// BlockDevice addresses the journal's own blocks: block 0 is the journal
// superblock. Blocks are all of the journal's block size; n is always below
// the journal's length (s_maxlen) when this package calls it.
type BlockDevice interface {
	ReadBlock(n uint32, p []byte) error
	WriteBlock(n uint32, p []byte) error
}

// RunWriter is implemented by devices that write several consecutive
// journal blocks in one call (one pwrite instead of one per block); Commit
// then gathers its blocks into runs of up to 1 MiB. len(p) is a multiple of
// the block size and the run never passes the end of the journal.
type RunWriter interface {
	WriteBlocks(n uint32, p []byte) error
}

// Sizer is implemented by devices that know how many journal blocks they
// hold; Open then refuses a superblock claiming more (s_maxlen), as Linux
// refuses a journal longer than its inode.
type Sizer interface {
	NumBlocks() uint32
}

// Flusher is implemented by devices (and home writers) that can make the
// writes issued so far durable. Commit and Checkpoint call Flush at the
// points where the journal's ordering requires it; a device without Flush
// is taken to write through.
type Flusher interface {
	Flush() error
}

// HomeWriter writes filesystem blocks to their home locations: where
// Checkpoint and Recover put the blocks the journal logged. fsBlock is a
// filesystem block number; p is one block.
type HomeWriter interface {
	WriteHome(fsBlock uint64, p []byte) error
}

func flush(x any) error {
	if f, ok := x.(Flusher); ok {
		return f.Flush()
	}
	return nil
}
