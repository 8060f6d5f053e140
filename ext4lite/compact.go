package ext4lite

import (
	"errors"
	"fmt"
)

// CompactStats reports what Compact did.
type CompactStats struct {
	UsedBytes       int64 `json:"used_bytes"`       // blocks in use × block size
	PunchedBytes    int64 `json:"punched_bytes"`    // free space handed back (or zeroed)
	AllocatedBefore int64 `json:"allocated_before"` // host bytes the file took before (-1: unknown)
	AllocatedAfter  int64 `json:"allocated_after"`  // and after
	Zeroed          bool  `json:"zeroed,omitempty"` // no hole punching here: free space was zeroed instead
}

// puncher is implemented by devices that can deallocate a byte range
// (leaving it reading as zeros).
type puncher interface {
	PunchHole(off, n int64) error
}

// allocSizer reports the host bytes a device takes.
type allocSizer interface {
	Allocated() (int64, error)
}

// errPunchUnsupported is returned by punchers on hosts that cannot punch.
var errPunchUnsupported = errors.New("hole punching not supported")

// errStopTrim ends Trim's pass where the host cannot punch.
var errStopTrim = errors.New("trim: cannot punch here")

// Compact makes the file small for cloning and shipping: it flushes and
// checkpoints everything (the journal is left empty), then deallocates
// every free block and the journal's log area in the host file, so the
// file's allocated size tracks the blocks in use. Where the host cannot
// punch holes, free space is zeroed instead (same content, no space saved).
// Contents are unchanged; the volume stays open.
func (v *FS) Compact() (*CompactStats, error) { return v.compact(true) }

// Trim is Compact without the zeroing: where the host cannot punch holes
// it stops punching and reports PunchedBytes so far. It is cheap enough
// to run at every clean close of an episode's volume (one pass over the
// block bitmaps, one fallocate per free run), where zeroing a mostly
// empty multi-GiB file would not be.
func (v *FS) Trim() (*CompactStats, error) { return v.compact(false) }

func (v *FS) compact(zeroFallback bool) (*CompactStats, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.writable(); err != nil {
		return nil, err
	}
	st := &CompactStats{AllocatedBefore: -1, AllocatedAfter: -1}
	dev := v.punchDevice()
	if a, ok := dev.(allocSizer); ok {
		st.AllocatedBefore, _ = a.Allocated()
	}
	if err := v.flushMetadata(); err != nil {
		return nil, err
	}
	bs := int64(v.bs)
	punch := func(blk, n uint64) error {
		if n == 0 {
			return nil
		}
		off, ln := int64(blk)*bs, int64(n)*bs
		st.PunchedBytes += ln
		if p, ok := dev.(puncher); ok && !st.Zeroed {
			err := p.PunchHole(off, ln)
			if err == nil {
				return nil
			}
			if !errors.Is(err, errPunchUnsupported) {
				return fmt.Errorf("punching %d bytes at %d: %w", ln, off, err)
			}
		}
		if !zeroFallback {
			st.PunchedBytes -= ln
			return errStopTrim
		}
		st.Zeroed = true
		zero := make([]byte, min(ln, 1<<20))
		for done := int64(0); done < ln; done += int64(len(zero)) {
			if err := v.writeAt(zero[:min(int64(len(zero)), ln-done)], off+done); err != nil {
				return err
			}
		}
		return nil
	}
	var used uint64
	for g := uint32(0); g < v.groupCount; g++ {
		bm, err := v.blockBitmapOf(g)
		if err != nil {
			return nil, err
		}
		first, n := v.groupFirstBlock(g), v.groupBlocks(g)
		for i := uint32(0); i < n; {
			if testBit(bm, i) {
				used++
				i++
				continue
			}
			j := i
			for j < n && !testBit(bm, j) {
				j++
			}
			if err := punch(first+uint64(i), uint64(j-i)); errors.Is(err, errStopTrim) {
				return st, v.syncDevice()
			} else if err != nil {
				return nil, err
			}
			i = j
		}
	}
	// The journal's log area: empty after the checkpoint, its old contents
	// are never read again (block 0, the journal superblock, stays).
	if jd, err := v.journalDevice(); err == nil && jd != nil {
		m, err := v.loadExtents(jd.in)
		if err != nil {
			return nil, err
		}
		for _, e := range m.ext {
			start, n := e.Start, uint64(e.Len)
			if e.Block == 0 {
				start, n = start+1, n-1
			}
			if err := punch(start, n); errors.Is(err, errStopTrim) {
				return st, v.syncDevice()
			} else if err != nil {
				return nil, err
			}
		}
	}
	st.UsedBytes = int64(used) * bs
	if err := v.syncDevice(); err != nil {
		return nil, err
	}
	if a, ok := dev.(allocSizer); ok {
		st.AllocatedAfter, _ = a.Allocated()
	}
	return st, nil
}
