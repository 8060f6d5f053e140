package ext4lite

// beginOp checks the volume is writable and, between operations (never
// inside one, so every transaction is a state between whole operations),
// flushes when the batch grows near the journal's size.
func (v *FS) beginOp() error {
	if err := v.writable(); err != nil {
		return err
	}
	if err := v.maybeFlush(); err != nil {
		return err
	}
	return v.reclaimFor(opReserve)
}

// opReserve is what any operation may allocate besides file data: a
// directory block, an xattr block, extent tree blocks.
const opReserve = 16

// reclaimFor commits the batch, between operations, when the blocks free
// now cannot cover need but blocks freed since the last commit are held:
// freed blocks are reused only once the transaction freeing them is
// committed (so a crash never shows a file's old blocks holding another's
// data), and without this a write right after a delete failed with
// ENOSPC until the next periodic sync.
func (v *FS) reclaimFor(need uint64) error {
	if len(v.pendingFree) == 0 {
		return nil
	}
	var free uint64
	for _, g := range v.groups {
		free += uint64(g.desc.FreeBlocks())
		if free >= need {
			return nil
		}
	}
	return v.flushMetadata()
}

// dataNeed is the blocks a write of n bytes may allocate.
func (v *FS) dataNeed(n int64) uint64 {
	return uint64(n)/uint64(v.bs) + 2 + opReserve
}

func (v *FS) writable() error {
	if v.closed {
		return ErrClosed
	}
	if v.readOnly {
		return ErrReadOnly
	}
	return nil
}
