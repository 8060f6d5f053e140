package jbd2

import (
	"fmt"
	"os"
	"path/filepath"
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

// fileDev is a journal in a plain file, no fsync: the syscall cost of
// Commit's writes, per block or gathered in runs.
type fileDev struct {
	f  *os.File
	bs int
}

func (d *fileDev) ReadBlock(n uint32, p []byte) error {
	_, err := d.f.ReadAt(p, int64(n)*int64(d.bs))
	return err
}

func (d *fileDev) WriteBlock(n uint32, p []byte) error {
	_, err := d.f.WriteAt(p, int64(n)*int64(d.bs))
	return err
}

type fileRunDev struct{ *fileDev }

func (d fileRunDev) WriteBlocks(n uint32, p []byte) error { return d.WriteBlock(n, p) }

// BenchmarkCommitFile commits 64-block transactions into a journal file,
// with and without RunWriter.
func BenchmarkCommitFile(b *testing.B) {
	for _, runs := range []bool{false, true} {
		b.Run(fmt.Sprintf("runs=%v", runs), func(b *testing.B) {
			const bs, n = 4096, 64
			f, err := os.Create(filepath.Join(b.TempDir(), "journal"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			if err := f.Truncate(8192 * bs); err != nil {
				b.Fatal(err)
			}
			fd := &fileDev{f: f, bs: bs}
			var dev BlockDevice = fd
			if runs {
				dev = fileRunDev{fd}
			}
			if err := Format(dev, bs, 8192, FormatOptions{Features: KernelFeatures}); err != nil {
				b.Fatal(err)
			}
			j, err := Open(dev, bs)
			if err != nil {
				b.Fatal(err)
			}
			data := make([]byte, bs)
			b.SetBytes(n * bs)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				tx, _ := j.Begin()
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
