package jbd2

import "fmt"

// MemDevice is an in-memory BlockDevice, for tests and tools: Blocks[n] is
// journal block n. It counts flushes.
type MemDevice struct {
	BlockSize int
	Blocks    [][]byte
	Flushes   int
}

// NewMemDevice returns a zeroed device of nblocks blocks.
func NewMemDevice(blockSize int, nblocks uint32) *MemDevice {
	d := &MemDevice{BlockSize: blockSize, Blocks: make([][]byte, nblocks)}
	return d
}

// ReadBlock copies block n into p. Blocks never written read as zeros.
func (d *MemDevice) ReadBlock(n uint32, p []byte) error {
	if int(n) >= len(d.Blocks) || len(p) != d.BlockSize {
		return fmt.Errorf("memdevice: read of block %d (%d bytes) out of range", n, len(p))
	}
	if b := d.Blocks[n]; b != nil {
		copy(p, b)
	} else {
		clear(p)
	}
	return nil
}

// WriteBlock copies p into block n.
func (d *MemDevice) WriteBlock(n uint32, p []byte) error {
	if int(n) >= len(d.Blocks) || len(p) != d.BlockSize {
		return fmt.Errorf("memdevice: write of block %d (%d bytes) out of range", n, len(p))
	}
	if d.Blocks[n] == nil {
		d.Blocks[n] = make([]byte, d.BlockSize)
	}
	copy(d.Blocks[n], p)
	return nil
}

// Flush counts the call.
func (d *MemDevice) Flush() error { d.Flushes++; return nil }

// NumBlocks returns the device's length in blocks.
func (d *MemDevice) NumBlocks() uint32 { return uint32(len(d.Blocks)) }
