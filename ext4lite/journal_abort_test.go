package ext4lite

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"

	"z.gfire.dev/gvx/sink"
)

// TestOpenJournalAborted: a volume whose journal holds a committed
// transaction with a bad descriptor (or commit) checksum opens: the log is
// cut at that transaction (its changes are not applied), the volume is
// flagged with errors as e2fsck flags it, Info says why, and the result is
// clean under Check and e2fsck -fn. Before, the bad descriptor made Open
// refuse the volume.
func TestOpenJournalAborted(t *testing.T) {
	for _, kind := range []string{"descriptor", "commit"} {
		t.Run(kind, func(t *testing.T) {
			v, p := newVolume(t, 32<<20)
			if err := v.WriteFile(&sink.Header{Path: "before", Mode: sink.TypeReg | 0o644, Size: 3}, strings.NewReader("old")); err != nil {
				t.Fatal(err)
			}
			if err := v.Sync(); err != nil {
				t.Fatal(err)
			}
			if err := v.WriteFile(&sink.Header{Path: "lost", Mode: sink.TypeReg | 0o644, Size: 3}, strings.NewReader("new")); err != nil {
				t.Fatal(err)
			}
			v.crashAfterCommit = true
			if err := v.Sync(); err != errCrashAfterCommit {
				t.Fatalf("Sync with the crash hook: %v", err)
			}
			v.file.Close() // abandoned, as by a crash

			// The journal is contiguous from the journal inode's first
			// extent; its superblock's s_start is the transaction's first
			// block.
			im := ckLoad(t, p)
			j0 := im.firstExtent(im.sb.JournalInum)
			start := binary.BigEndian.Uint32(im.block(j0)[0x1C:])
			found := false
			for b := uint64(start); b < uint64(start)+64 && !found; b++ {
				blk := im.block(j0 + b)
				if binary.BigEndian.Uint32(blk) != 0xC03B3998 {
					continue
				}
				typ := binary.BigEndian.Uint32(blk[4:])
				if kind == "descriptor" && typ == 1 || kind == "commit" && typ == 2 {
					blk[len(blk)-8] ^= 1
					found = true
				}
			}
			if !found {
				t.Fatalf("no %s block in the log", kind)
			}
			if err := os.WriteFile(p, im.b, 0o644); err != nil {
				t.Fatal(err)
			}

			r, err := Open(p, nil)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			info, err := r.Info()
			if err != nil {
				t.Fatal(err)
			}
			if want := kind + " block checksum fails"; !strings.Contains(info.JournalAborted, want) {
				t.Errorf("Info.JournalAborted = %q, want it to say %q", info.JournalAborted, want)
			}
			if _, err := r.Lstat("before"); err != nil {
				t.Errorf("a file synced before the corrupt transaction: %v", err)
			}
			if _, err := r.Lstat("lost"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the corrupt transaction's file: %v, want it absent", err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if ckLoad(t, p).sb.State&2 == 0 {
				t.Error("s_state lacks EXT4_ERROR_FS after an aborted replay")
			}
			if err := ckFile(t, p).Err(); err != nil {
				t.Error(err)
			}
			if ckPeerCheck != nil {
				ckPeerCheck(t, p)
			}
		})
	}
}

// TestOpenExternalJournal: a volume whose journal is external (mkfs.ext4
// -J device=: s_journal_inum 0, s_journal_uuid and s_journal_dev set) is
// refused for writing with ErrUnsupported naming it, and opens read-only.
// Before, it opened read-write as if it had no journal, and writes went
// unjournaled past the journal the kernel would replay.
func TestOpenExternalJournal(t *testing.T) {
	v, p := newVolume(t, 32<<20)
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	im := ckLoad(t, p)
	sb := im.b[1024 : 1024+1024]
	copy(sb[0xD0:0xE0], "external-journal")          // s_journal_uuid
	binary.LittleEndian.PutUint32(sb[0xE0:], 0)      // s_journal_inum
	binary.LittleEndian.PutUint32(sb[0xE4:], 0x0701) // s_journal_dev
	im.fixSuper()
	if err := os.WriteFile(p, im.b, 0o644); err != nil {
		t.Fatal(err)
	}
	if v, err := Open(p, nil); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "external journal") {
		if err == nil {
			v.Close()
		}
		t.Fatalf("read-write open: %v, want ErrUnsupported naming the external journal", err)
	}
	r, err := Open(p, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open: %v", err)
	}
	defer r.Close()
	if _, err := r.ReadDir("."); err != nil {
		t.Fatal(err)
	}
}
