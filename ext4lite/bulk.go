package ext4lite

// Bulk loading (CreateOptions.BulkLoad): a new volume filled before
// anyone opens it needs no journal transactions, only a guarantee that a
// crash before Close leaves nothing that passes for a volume. Until Close
// the superblock goes to disk without its magic and the backups are not
// written; flushes write metadata home, sorted and in runs, and never
// flush the device. endBulk makes everything durable first and only then
// lets Close write the real superblocks.

// bulkBudget is how many staged metadata blocks a bulk load gathers
// before it flushes (64 MiB of 4 KiB blocks). A directory is rewritten
// whole at each flush, so fewer flushes are less work; the bound keeps
// the memory held fixed.
const bulkBudget = 1 << 14

// superBytes encodes the primary superblock as it may go to disk: during a
// bulk load without its magic.
func (v *FS) superBytes() []byte {
	if v.bulk {
		sb := *v.sb
		sb.Magic = 0
		return sb.Encode()
	}
	return v.sb.Encode()
}

// endBulk ends a bulk load at Close, after the last flush: the device is
// flushed, so every block the superblock will describe is durable before
// it is written, with its magic, by Close (which then writes the backups
// and flushes again).
func (v *FS) endBulk() error {
	if err := v.syncDevice(); err != nil {
		return err
	}
	v.bulk = false
	return nil
}

// writeHomeRuns writes the staged blocks (sorted) home, one write per run
// of consecutive blocks.
func (v *FS) writeHomeRuns(blocks []uint64) error {
	h := home{v}
	var run []byte
	for i := 0; i < len(blocks); {
		j := i + 1
		for j < len(blocks) && blocks[j] == blocks[j-1]+1 && j-i < 256 {
			j++
		}
		if j == i+1 {
			if err := h.WriteHome(blocks[i], v.meta[blocks[i]]); err != nil {
				return err
			}
			i = j
			continue
		}
		if first, last := blocks[i], blocks[j-1]; first < v.firstDataBlock && v.firstDataBlock > 0 || last >= v.blocksCount {
			return corruptf(-1, 0, "metadata blocks %d..%d outside the filesystem", first, last)
		}
		run = run[:0]
		for _, b := range blocks[i:j] {
			run = append(run, v.meta[b][:v.bs]...)
		}
		if err := v.writeAt(run, int64(blocks[i])*int64(v.bs)); err != nil {
			return err
		}
		i = j
	}
	return nil
}
