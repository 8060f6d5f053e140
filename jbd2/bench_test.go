package jbd2

import (
	"fmt"
	"testing"
)

type discardHome struct{}

func (discardHome) WriteHome(uint64, []byte) error { return nil }

// BenchmarkCommit measures Begin+Log+Commit of transactions of n 4 KiB
// blocks (checksum v3, 64bit) into an in-memory journal of 32 MiB: the CPU
// cost of the journal itself (copies, escaping, crc32c, descriptors).
func BenchmarkCommit(b *testing.B) {
	for _, n := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("blocks=%d", n), func(b *testing.B) {
			const bs = 4096
			_, j := newJournal(b, bs, 8192, KernelFeatures)
			data := make([]byte, bs)
			for i := range data {
				data[i] = byte(i * 7)
			}
			b.SetBytes(int64(n * bs))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				tx, err := j.Begin()
				if err != nil {
					b.Fatal(err)
				}
				for k := range n {
					tx.Log(uint64(i*n+k)%100000, data)
				}
				if uint32(tx.Blocks()) > j.Free() {
					b.StopTimer()
					if err := j.Checkpoint(discardHome{}); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRecover measures replaying a full 4 MiB journal of 16-block
// transactions.
func BenchmarkRecover(b *testing.B) {
	const bs = 4096
	dev, j := newJournal(b, bs, 1024, KernelFeatures)
	data := make([]byte, bs)
	blocks := 0
	for i := 0; ; i++ {
		tx, _ := j.Begin()
		for k := range 16 {
			tx.Log(uint64(i*16+k), data)
		}
		if uint32(tx.Blocks()) > j.Free() {
			break
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		blocks += 16
	}
	b.SetBytes(int64(blocks * bs))
	b.ReportAllocs()
	for b.Loop() {
		d := dev.clone()
		if _, err := Recover(d, bs, discardHome{}, 1<<20); err != nil {
			b.Fatal(err)
		}
	}
}
