package jbd2_test

import (
	"fmt"

	"z.gfire.dev/gvx/jbd2"
)

// homeMap is a toy filesystem: block number → content.
type homeMap map[uint64][]byte

func (h homeMap) WriteHome(b uint64, p []byte) error {
	h[b] = append([]byte(nil), p...)
	return nil
}

func Example() {
	const bs = 4096
	dev := jbd2.NewMemDevice(bs, 1024)
	if err := jbd2.Format(dev, bs, 1024, jbd2.FormatOptions{UUID: [16]byte{1}}); err != nil {
		panic(err)
	}
	j, err := jbd2.Open(dev, bs)
	if err != nil {
		panic(err)
	}
	if err := j.SetFeatures(jbd2.KernelFeatures); err != nil {
		panic(err)
	}
	tx, _ := j.Begin()
	block := make([]byte, bs)
	copy(block, "new inode table")
	tx.Log(42, block)
	if err := tx.Commit(); err != nil {
		panic(err)
	}

	// Crash before the checkpoint: on the next open, replay.
	j2, _ := jbd2.Open(dev, bs)
	home := homeMap{}
	st, err := j2.Recover(home, 1<<20)
	fmt.Println(j2.NeedsRecovery(), st.Transactions, st.Blocks, string(home[42][:15]), err)
	// Output: false 1 1 new inode table <nil>
}
