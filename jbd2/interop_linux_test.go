package jbd2

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/jbd2/internal/disk"
)

// writeFile puts a file into the image with debugfs and returns its blocks.
func writeFile(t testing.TB, img, name string, content []byte) []uint64 {
	return writeFileBS(t, img, name, content, 4096)
}

func writeFileBS(t testing.TB, img, name string, content []byte, bs int) []uint64 {
	t.Helper()
	src := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(src, content, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, "debugfs", "-w", "-R", "write "+src+" "+name, img)
	var bl []uint64
	for i := 0; i*bs < len(content); i++ {
		out := run(t, "debugfs", "-R", fmt.Sprintf("bmap /%s %d", name, i), img)
		f := strings.Fields(out)
		n, err := strconv.ParseUint(f[len(f)-1], 10, 64)
		if err != nil || n == 0 {
			t.Fatalf("bmap /%s %d: %q", name, i, out)
		}
		bl = append(bl, n)
	}
	return bl
}

func catFile(t testing.TB, img, name string) []byte {
	t.Helper()
	out, err := exec.Command("debugfs", "-R", "cat /"+name, img).Output()
	if err != nil {
		t.Fatalf("debugfs cat /%s: %v", name, err)
	}
	return out
}

func pattern(seed byte, n int) []byte {
	p := make([]byte, n)
	h := sha256.Sum256([]byte{seed})
	for i := range p {
		if i%32 == 0 {
			h = sha256.Sum256(h[:])
		}
		p[i] = h[i%32]
	}
	return p
}

// TestInteropE2fsckReplaysOurs (interop A): transactions our Journal writes
// into a mkfs.ext4 image are replayed by e2fsck; the file contents we
// logged land home, revoked blocks do not, and the result is clean. Our own
// Recover on a copy gives the very same image as e2fsck's replay.
func TestInteropE2fsckReplaysOurs(t *testing.T) {
	img := mkfsImage(t)
	old := pattern(1, 3*4096)
	fileBlocks := writeFile(t, img, "data", old)
	e2fsckClean(t, img)

	dev := openImageDevice(t, img)
	j, err := Open(dev, dev.bs)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.SetFeatures(KernelFeatures); err != nil { // what Linux does at mount
		t.Fatal(err)
	}
	j.SetClock(func() time.Time { return time.Unix(1764000000, 123) })

	// The directory block of / is logged unchanged (metadata in a real tx).
	rootBlk := func() uint64 {
		out := run(t, "debugfs", "-R", "bmap / 0", img)
		f := strings.Fields(out)
		n, _ := strconv.ParseUint(f[len(f)-1], 10, 64)
		return n
	}()
	rootOld := dev.readFS(t, rootBlk)

	want := bytes.Clone(old)
	b0 := pattern(2, 4096)
	putBE32(b0, magic) // must be escaped in the log, restored on replay
	b1 := pattern(3, 4096)
	b2 := pattern(4, 4096)
	commit := func(f func(tx *Tx)) {
		tx, err := j.Begin()
		if err != nil {
			t.Fatal(err)
		}
		f(tx)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	commit(func(tx *Tx) {
		tx.Log(fileBlocks[0], b0)
		tx.Log(fileBlocks[2], b2) // revoked by the next transaction: stays old
		tx.Log(rootBlk, rootOld)
	})
	commit(func(tx *Tx) {
		tx.Revoke(fileBlocks[2])
		tx.Log(fileBlocks[1], pattern(9, 4096))
	})
	commit(func(tx *Tx) { tx.Log(fileBlocks[1], b1) }) // later wins
	copy(want[0:], b0)
	copy(want[4096:], b1)
	if j.Features().Incompat&IncompatRevoke == 0 {
		t.Error("revoke feature not set after a revoke")
	}
	setNeedsRecovery(t, img, true)

	// Linux replays it at mount (when we may mount).
	kernelReplays(t, img, "data", want)

	// Our replay and e2fsck's replay agree byte for byte...
	ours, st := replayBoth(t, img)
	if st.Transactions != 3 || st.Blocks != 4 || st.Revoked != 1 {
		t.Errorf("our recovery stats %+v", st)
	}
	if got := catFile(t, ours, "data"); !bytes.Equal(got, want) {
		t.Error("our replay: file content differs")
	}
	// ...and a full e2fsck replays the original, then finds nothing wrong.
	out, err := exec.Command("e2fsck", "-fy", img).CombinedOutput()
	if code := exitCode(err); code > 1 {
		t.Fatalf("e2fsck -fy: exit %d\n%s", code, out)
	}
	if !bytes.Contains(out, []byte("recovering journal")) {
		t.Errorf("e2fsck did not replay:\n%s", out)
	}
	e2fsckClean(t, img)
	if got := catFile(t, img, "data"); !bytes.Equal(got, want) {
		t.Error("e2fsck's replay: file content differs from what we logged")
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return 99
}

// TestInteropRecoverDebugfsJournal (interop B): journals written by
// e2fsprogs' own writer (debugfs jo/jw/jc), with and without checksums,
// replayed by our Recover and by e2fsck: identical images.
func TestInteropRecoverDebugfsJournal(t *testing.T) {
	for _, c := range []struct {
		name, open string
		bs         int
		mkfs       []string
	}{
		{"csum-v3", "jo -c", 4096, nil},
		{"no-csum", "jo", 4096, nil},
		{"csum-v3-1k", "jo -c", 1024, nil},
		// Checksum v3 on a filesystem without 64bit: 16-byte tags whose
		// t_blocknr_high is not a block number (the kernel reads it only
		// with the journal's 64bit feature). Read as one, it made
		// "transaction 1 logs block 10528625216723091727".
		{"csum-v3-32bit-fs", "jo -c", 4096, []string{"-O", "^64bit"}},
		{"csum-v3-32bit-fs-1k", "jo -c", 1024, []string{"-O", "^64bit"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			bs := c.bs
			img := mkfsImageBS(t, bs, c.mkfs...)
			fileBlocks := writeFileBS(t, img, "data", pattern(1, 4*bs), bs)
			dir := t.TempDir()
			one, three := filepath.Join(dir, "one"), filepath.Join(dir, "three")
			blk := pattern(5, bs)
			putBE32(blk, magic)
			os.WriteFile(one, blk, 0o644)
			os.WriteFile(three, pattern(6, 3*bs), 0o644)
			b := func(i int) string { return strconv.FormatUint(fileBlocks[i], 10) }
			cmds := strings.Join([]string{
				c.open,
				"jw -b " + b(0) + " " + one,
				"jw -b " + b(1) + "," + b(2) + "," + b(3) + " " + three,
				"jw -r " + b(2),
				"jw -b " + b(3) + " " + one,
				"jc",
			}, "\n") + "\n"
			script := filepath.Join(dir, "cmds")
			os.WriteFile(script, []byte(cmds), 0o644)
			run(t, "debugfs", "-w", "-f", script, img)

			ours, st := replayBoth(t, img)
			if st.Transactions != 4 || st.Revoked != 1 {
				t.Errorf("stats %+v", st)
			}
			want := pattern(1, 4*bs)
			copy(want, blk)
			copy(want[bs:], pattern(6, 3*bs)[:bs])
			copy(want[3*bs:], blk)
			if got := catFile(t, ours, "data"); !bytes.Equal(got, want) {
				t.Error("replayed file content differs")
			}
			e2fsckClean(t, ours)
		})
	}
}

// TestInteropWrappedLog: after many transactions and checkpoints the log
// wraps around the end of the journal in the middle of a transaction;
// e2fsck, Linux and our Recover must all replay it to the same file.
func TestInteropWrappedLog(t *testing.T) {
	img := mkfsImage(t)
	const nblk = 300
	content := pattern(1, nblk*4096)
	fileBlocks := writeFile(t, img, "big", content)
	dev := openImageDevice(t, img)
	j, err := Open(dev, dev.bs)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.SetFeatures(KernelFeatures); err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(content)
	for i := 0; ; i++ {
		if i > 100 {
			t.Fatal("the log never wrapped mid-transaction")
		}
		tx, _ := j.Begin()
		for k := range 97 {
			idx := (i*97 + k*3) % nblk
			p := pattern(byte(i*31+k), 4096)
			if k%10 == 0 {
				putBE32(p, magic)
			}
			tx.Log(fileBlocks[idx], p)
			copy(want[idx*4096:], p)
		}
		if uint32(tx.Blocks()) > j.Free() {
			if err := j.Checkpoint(dev); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		spans := false
		for _, ct := range j.pending {
			spans = spans || ct.blocks[len(ct.blocks)-1].jblock < ct.blocks[0].jblock
		}
		if spans && len(j.pending) >= 3 {
			break // the log holds several transactions, one split by the wrap
		}
	}
	setNeedsRecovery(t, img, true)
	kernelReplays(t, img, "big", want)
	ours, st := replayBoth(t, img)
	t.Logf("replayed %+v", st)
	if st.Transactions < 2 {
		t.Errorf("log holds %d transactions", st.Transactions)
	}
	if got := catFile(t, ours, "big"); !bytes.Equal(got, want) {
		t.Errorf("replayed file differs (stats %+v)", st)
	}
	e2fsckClean(t, ours)
}

// kernelReplays mounts a copy of img with a dirty journal (root only), so
// Linux replays it, and checks the file's content and a clean e2fsck.
func kernelReplays(t *testing.T, img, name string, want []byte) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Log("not root: skipping the kernel replay (CI runs it)")
		return
	}
	cp := filepath.Join(t.TempDir(), "kernel.img")
	copyFile(t, img, cp)
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-o", "loop,nosuid,nodev", cp, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount of our dirty journal: %v\n%s", err, out)
	}
	got, rerr := os.ReadFile(filepath.Join(mnt, name))
	if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v\n%s", err, out)
	}
	if rerr != nil {
		t.Fatal(rerr)
	}
	if !bytes.Equal(got, want) {
		t.Error("after Linux replayed our journal, the file differs from what we logged")
	}
	e2fsckClean(t, cp)
}

// TestInteropE2fsckFeatureSets: for every feature combination our writer
// supports (32/64-bit tags, no checksum, v2, v3), e2fsck replays our
// transactions to the same image as our Recover, with the logged content.
func TestInteropE2fsckFeatureSets(t *testing.T) {
	for _, fs := range featureSets {
		t.Run(fs.name, func(t *testing.T) {
			img := mkfsImage(t)
			fileBlocks := writeFile(t, img, "data", pattern(1, 4*4096))
			dev := openImageDevice(t, img)
			j, err := Open(dev, dev.bs)
			if err != nil {
				t.Fatal(err)
			}
			if err := j.SetFeatures(fs.f); err != nil {
				t.Fatal(err)
			}
			want := pattern(1, 4*4096)
			for i := range 3 {
				tx, _ := j.Begin()
				p := pattern(byte(10+i), 4096)
				if i == 1 {
					putBE32(p, magic)
				}
				tx.Log(fileBlocks[i], p)
				copy(want[i*4096:], p)
				tx.Log(fileBlocks[3], pattern(20, 4096))
				if i == 2 {
					tx.Revoke(fileBlocks[3])
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			setNeedsRecovery(t, img, true)
			ours, st := replayBoth(t, img)
			if st.Transactions != 3 || st.Revoked != 2 {
				t.Errorf("stats %+v", st)
			}
			if got := catFile(t, ours, "data"); !bytes.Equal(got, want) {
				t.Error("replayed content differs")
			}
		})
	}
}

// TestInteropCsumV3Tags32: on a filesystem without 64bit, a checksum v3
// journal (what Linux sets on a metadata_csum ext4 without 64bit) whose
// tags carry garbage in t_blocknr_high (the descriptor checksum fixed to
// match) is replayed by e2fsck and by our Recover to the same image.
// Before, Recover read the field as the block number's high half and
// refused the journal ("logs block 10528625216723091727").
func TestInteropCsumV3Tags32(t *testing.T) {
	img := mkfsImageBS(t, 4096, "-O", "^64bit")
	fileBlocks := writeFile(t, img, "data", pattern(1, 4*4096))
	dev := openImageDevice(t, img)
	j, err := Open(dev, dev.bs)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.SetFeatures(Features{Incompat: IncompatCsumV3}); err != nil {
		t.Fatal(err)
	}
	want := pattern(1, 4*4096)
	for i := range 2 {
		tx, _ := j.Begin()
		for k := range 2 {
			p := pattern(byte(10+2*i+k), 4096)
			tx.Log(fileBlocks[i*2+k], p)
			copy(want[(i*2+k)*4096:], p)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	// Garbage into every tag's t_blocknr_high.
	buf := make([]byte, dev.bs)
	n := 0
	for b := uint32(1); b < dev.NumBlocks(); b++ {
		if err := dev.ReadBlock(b, buf); err != nil {
			t.Fatal(err)
		}
		if h := disk.ReadHeader(buf); h.Magic != disk.Magic || h.BlockType != disk.BlockDescriptor {
			continue
		}
		for off := disk.HeaderSize; off+disk.Tag3Size <= dev.bs-disk.TailSize; {
			flags := binary.BigEndian.Uint32(buf[off+4:])
			binary.BigEndian.PutUint32(buf[off+8:], 0x921d9e3f+uint32(n))
			n++
			off += disk.Tag3Size
			if flags&disk.FlagSameUUID == 0 {
				off += disk.UUIDSize
			}
			if flags&disk.FlagLastTag != 0 {
				break
			}
		}
		disk.SetTailChecksum(j.seed, buf)
		if err := dev.WriteBlock(b, buf); err != nil {
			t.Fatal(err)
		}
	}
	if n != 4 {
		t.Fatalf("rewrote %d tags, want 4", n)
	}
	setNeedsRecovery(t, img, true)
	ours, st := replayBoth(t, img)
	if st.Transactions != 2 || st.Blocks != 4 {
		t.Errorf("stats %+v", st)
	}
	if got := catFile(t, ours, "data"); !bytes.Equal(got, want) {
		t.Error("replayed content differs")
	}
	e2fsckClean(t, ours)
}

// dataFileJournal makes an mkfs.ext4 image holding a 4-block file "data"
// (pattern 1) and opens its journal with the kernel's features: the
// fixture of the corrupt-journal tests.
func dataFileJournal(t *testing.T) (img string, fileBlocks []uint64, dev *imageDevice, j *Journal) {
	t.Helper()
	img = mkfsImage(t)
	fileBlocks = writeFile(t, img, "data", pattern(1, 4*4096))
	dev = openImageDevice(t, img)
	j, err := Open(dev, dev.bs)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.SetFeatures(KernelFeatures); err != nil {
		t.Fatal(err)
	}
	return img, fileBlocks, dev, j
}

// TestInteropCorruptTransaction: a committed transaction of three with a
// bad checksum. A bad commit checksum: our replay and e2fsck's give the
// same image (transaction 1 replayed; e2fsck says "Journal transaction N
// was corrupt, replay was aborted"). A bad descriptor, revoke or logged
// block checksum: we replay transaction 1 and report; e2fsprogs 1.47
// recovers too (it replays nothing, or all but the bad block) and neither
// refuses the volume. Every result is clean under e2fsck -fn.
func TestInteropCorruptTransaction(t *testing.T) {
	for _, kind := range []string{"commit", "descriptor", "revoke", "logged block"} {
		t.Run(strings.ReplaceAll(kind, " ", "-"), func(t *testing.T) {
			img, fileBlocks, dev, j := dataFileJournal(t)
			want := pattern(1, 4*4096)
			for i := range 3 {
				tx, _ := j.Begin()
				p := pattern(byte(10+i), 4096)
				tx.Log(fileBlocks[i], p)
				tx.Revoke(fileBlocks[3])
				if i == 0 {
					copy(want[i*4096:], p)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			ct := j.pending[1]
			at := map[string]uint32{"commit": ct.blocks[0].jblock + 1, "descriptor": ct.blocks[0].jblock - 1,
				"revoke": ct.blocks[0].jblock - 2, "logged block": ct.blocks[0].jblock}[kind]
			buf := make([]byte, dev.bs)
			if err := dev.ReadBlock(at, buf); err != nil {
				t.Fatal(err)
			}
			if h := disk.ReadHeader(buf); kind == "revoke" && h.BlockType != disk.BlockRevoke || kind == "commit" && h.BlockType != disk.BlockCommit {
				t.Fatalf("journal block %d is a %d block, not a %s block", at, h.BlockType, kind)
			}
			buf[200] ^= 1
			if err := dev.WriteBlock(at, buf); err != nil {
				t.Fatal(err)
			}
			setNeedsRecovery(t, img, true)

			var ours string
			var st Stats
			if kind == "commit" {
				ours, st = replayBoth(t, img)
			} else {
				ours = filepath.Join(t.TempDir(), "ours.img")
				copyFile(t, img, ours)
				d := openImageDevice(t, ours)
				var err error
				if st, err = Recover(d, d.bs, d, fsBlocksCount(t, ours)); err != nil {
					t.Fatalf("our recovery: %v", err)
				}
				setNeedsRecovery(t, ours, false)
				theirs := filepath.Join(t.TempDir(), "e2fsck.img")
				copyFile(t, img, theirs)
				out, err := exec.Command("e2fsck", "-y", "-E", "journal_only", theirs).CombinedOutput()
				if err != nil {
					t.Errorf("e2fsck -E journal_only refused the journal: %v\n%s", err, out)
				}
				t.Logf("e2fsck: %s", bytes.TrimSpace(out))
				e2fsckClean(t, theirs)
			}
			if st.Transactions != 1 || !strings.Contains(st.Aborted, fmt.Sprintf("transaction %d: ", ct.seq)) {
				t.Errorf("stats %+v: want transaction 1 replayed and %d reported", st, ct.seq)
			}
			if got := catFile(t, ours, "data"); !bytes.Equal(got, want) {
				t.Error("replayed content is not transaction 1's")
			}
			e2fsckClean(t, ours)
		})
	}
}

// TestInteropRevokedBadBlock: transaction 2 logs two blocks of a file,
// the second of which transaction 3 revokes, and that second block's copy
// in the log is damaged. Its checksum does not count (it is never
// written home): e2fsck replays all three transactions to the same image
// as ours, and so does Linux at mount. FuzzReplay found that Recover cut
// the log at transaction 2 instead.
func TestInteropRevokedBadBlock(t *testing.T) {
	img, fileBlocks, dev, j := dataFileJournal(t)
	want := pattern(1, 4*4096)
	for i, logged := range [][]int{{0}, {1, 2}, {3}} {
		tx, _ := j.Begin()
		for _, b := range logged {
			p := pattern(byte(20+b), 4096)
			tx.Log(fileBlocks[b], p)
			if b != 2 {
				copy(want[b*4096:], p)
			}
		}
		if i == 2 {
			tx.Revoke(fileBlocks[2])
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	bad := j.pending[1].blocks[1] // fileBlocks[2]'s copy in transaction 2
	if bad.fsBlock != fileBlocks[2] {
		t.Fatalf("transaction 2's second block goes home to %d, not %d", bad.fsBlock, fileBlocks[2])
	}
	buf := make([]byte, dev.bs)
	if err := dev.ReadBlock(bad.jblock, buf); err != nil {
		t.Fatal(err)
	}
	buf[200] ^= 1
	if err := dev.WriteBlock(bad.jblock, buf); err != nil {
		t.Fatal(err)
	}
	setNeedsRecovery(t, img, true)

	ours, st := replayBoth(t, img)
	if st.Transactions != 3 || st.Aborted != "" {
		t.Errorf("stats %+v: want all 3 transactions replayed, nothing aborted", st)
	}
	if got := catFile(t, ours, "data"); !bytes.Equal(got, want) {
		t.Error("replayed content differs from the three transactions'")
	}
	e2fsckClean(t, ours)
	kernelReplays(t, img, "data", want)
}

// TestInteropChecksumV1: a journal with checksum v1 (COMPAT_CHECKSUM: what
// debugfs's "jo -c" makes on a filesystem without metadata_csum, and the
// kernel's journal_checksum option on old kernels) has a crc32_be of each
// transaction's descriptor and logged blocks in its commit block. The
// kernel and e2fsck verify it and end the log at a mismatch; debugfs's jw
// counts a revoke block in, so a revoke-only transaction fails and is not
// replayed: e2fsck then writes the revoked block. Recover read v1 sums as
// "accepted and ignored", applied the revoke and so replayed differently
// from e2fsck and debugfs -R jr (found by fuzz.FuzzReplay).
func TestInteropChecksumV1(t *testing.T) {
	const bs = 1024
	img := mkfsImageBS(t, bs, "-O", "^metadata_csum")
	fileBlocks := writeFileBS(t, img, "data", pattern(1, 3*bs), bs)
	dir := t.TempDir()
	one := filepath.Join(dir, "one")
	os.WriteFile(one, pattern(7, bs), 0o644)
	b := func(i int) string { return strconv.FormatUint(fileBlocks[i], 10) }
	script := filepath.Join(dir, "cmds")
	os.WriteFile(script, []byte(strings.Join([]string{
		"jo -c", "jw -b " + b(0) + " " + one, "jw -b " + b(1) + " " + one, "jw -r " + b(1), "jc",
	}, "\n")+"\n"), 0o644)
	run(t, "debugfs", "-w", "-f", script, img)
	if !strings.Contains(dumpJournalFields(t, img), "journal_checksum") {
		t.Skipf("debugfs did not make a checksum v1 journal:\n%s", dumpJournalFields(t, img))
	}
	ours, st := replayBoth(t, img) // also: same image as e2fsck's replay
	if st.Transactions != 2 || st.Aborted == "" {
		t.Errorf("stats %+v: want the two data transactions replayed and the revoke-only one cut", st)
	}
	want := pattern(1, 3*bs)
	copy(want, pattern(7, bs))
	copy(want[bs:], pattern(7, bs))
	if got := catFile(t, ours, "data"); !bytes.Equal(got, want) {
		t.Error("replayed file content differs")
	}
}
