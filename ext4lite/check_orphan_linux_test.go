package ext4lite

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
	"z.gfire.dev/gvx/sink"
)

// Volumes with orphan_file, as e2fsprogs ≥ 1.47 makes them by default
// (Debian trixie/sid, Ubuntu 24.04+): made by the host's mke2fs with -O
// orphan_file,metadata_csum_seed (1.47.0 knows the feature, but bookworm's
// mke2fs.conf does not turn it on), and by sid's mke2fs 1.47.4 with its
// own defaults when bench/sidroot.sh has cached a sid root.

// ckOrphanMakers are the mke2fs builds the tests make volumes with.
var ckOrphanMakers = []string{"host", "sid"}

// ckOrphanMkfs makes an empty ext4 volume of size with orphan_file by the
// named mke2fs (ckOrphanMakers), with extra options; it skips the test
// when that mke2fs is not there.
func ckOrphanMkfs(t testing.TB, maker, size string, opts ...string) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), maker+".ext4")
	var cmd *exec.Cmd
	args := append([]string{"-F", "-q", "-t", "ext4"}, opts...)
	switch maker {
	case "host":
		if _, err := exec.LookPath("mke2fs"); err != nil {
			t.Skip("mke2fs not installed (apt-get install e2fsprogs)")
		}
		if strings.Contains(strings.Join(opts, " "), "^metadata_csum_seed") {
			args = append(args, "-O", "orphan_file")
		} else {
			args = append(args, "-O", "orphan_file,metadata_csum_seed")
		}
		cmd = exec.Command("mke2fs", append(args, img, size)...)
	case "sid":
		root := ckSidRoot(t)
		arch := "x86_64-linux-gnu"
		ld := filepath.Join(root, "usr/lib", arch, "ld-linux-x86-64.so.2")
		cmd = exec.Command(ld, append([]string{"--library-path", filepath.Join(root, "usr/lib", arch),
			filepath.Join(root, "usr/sbin/mke2fs")}, append(args, img, size)...)...)
		// sid's own defaults (orphan_file, metadata_csum_seed), not the host's.
		cmd.Env = append(os.Environ(), "MKE2FS_CONFIG="+filepath.Join(root, "etc/mke2fs.conf"))
	default:
		t.Fatalf("unknown mke2fs %q", maker)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		if maker == "host" && strings.Contains(string(out), "orphan_file") {
			t.Skipf("the host's mke2fs does not know orphan_file (needs e2fsprogs ≥ 1.47): %s", out)
		}
		t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
	}
	im := ckLoad(t, img)
	if im.sb.FeatureCompat&disk.CompatOrphanFile == 0 || im.sb.OrphanFileInum == 0 {
		t.Fatalf("%s mke2fs made no orphan file (compat %#x)", maker, im.sb.FeatureCompat)
	}
	return img
}

// ckSidRoot is a Debian sid root with e2fsprogs that bench/sidroot.sh
// (run by scripts/setup.sh) cached under $GVX_BENCH_CACHE
// (/var/tmp/gvx-bench-cache-UID); it skips the test when there is none.
// The test runs that root's mke2fs, so a cache directory another user
// could write (or a link to one) fails the test instead of being used.
func ckSidRoot(t testing.TB) string {
	t.Helper()
	cache := os.Getenv("GVX_BENCH_CACHE")
	if cache == "" {
		cache = fmt.Sprintf("/var/tmp/gvx-bench-cache-%d", os.Getuid())
	}
	if st, err := os.Lstat(cache); err == nil {
		sys, _ := st.Sys().(*syscall.Stat_t)
		if !st.IsDir() || sys == nil || int(sys.Uid) != os.Getuid() || st.Mode().Perm()&0o022 != 0 {
			t.Fatalf("%s is not a directory of uid %d that only it can write (%v): its binaries would run as this user; remove it or set GVX_BENCH_CACHE", cache, os.Getuid(), st.Mode())
		}
	}
	roots, _ := filepath.Glob(filepath.Join(cache, "sid-*"))
	for _, r := range roots {
		_, errC := os.Stat(filepath.Join(r, ".complete"))
		_, errM := os.Stat(filepath.Join(r, "usr/sbin/mke2fs"))
		_, errL := os.Stat(filepath.Join(r, "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"))
		if errC == nil && errM == nil && errL == nil {
			return r
		}
	}
	t.Skipf("no cached Debian sid root with mke2fs under %s (make one, as root: ./scripts/setup.sh)", cache)
	return ""
}

// TestCheckOrphanFileFresh: volumes made by mke2fs with orphan_file, on
// 1 KiB and 4 KiB blocks, are clean under Check and e2fsck -fn alike;
// Check counts the orphan file's inode and blocks in use.
func TestCheckOrphanFileFresh(t *testing.T) {
	for _, maker := range ckOrphanMakers {
		for _, tc := range []struct {
			name, size string
			opts       []string
		}{
			{"1k", "64M", []string{"-b", "1024"}},
			{"4k", "256M", []string{"-b", "4096"}},
			{"4k-no-resize-inode", "64M", []string{"-b", "4096", "-O", "^resize_inode"}},
			// Without metadata_csum the tails carry the magic only.
			{"1k-uninit_bg", "32M", []string{"-b", "1024", "-O", "^metadata_csum,^metadata_csum_seed,uninit_bg"}},
		} {
			t.Run(maker+"/"+tc.name, func(t *testing.T) {
				img := ckOrphanMkfs(t, maker, tc.size, tc.opts...)
				e2fsckClean(t, img)
				r := ckFile(t, img)
				if err := r.Err(); err != nil {
					t.Fatal(err)
				}
				im := ckLoad(t, img)
				if want := im.sb.InodesCount - im.sb.FreeInodesCount; r.Inodes != want {
					t.Errorf("Check counts %d inodes in use, the superblock %d", r.Inodes, want)
				}
				blocks := ckOrphanBlocks(t, im)
				if len(blocks) < 32 {
					t.Errorf("orphan file of %d blocks", len(blocks))
				}
				// Every tail is read: a wrong magic in the last block is found.
				last := len(blocks) - 1
				bad := ckCorrupted(t, img, func(t *testing.T, im *ckImage) { im.block(blocks[last])[im.bs-8] ^= 1 })
				if r := ckFile(t, bad); r.Clean() || !strings.Contains(r.Err().Error(), fmt.Sprintf("block %d: orphan file block magic", last)) {
					t.Errorf("a bad magic in orphan file block %d: %v", last, r.Err())
				}
			})
		}
	}
}

// TestCheckOrphanFileCorruptions: crafted damage to the orphan file, its
// inode or the superblock fields about it is a finding, and e2fsck -fn
// complains about every one of them too.
func TestCheckOrphanFileCorruptions(t *testing.T) {
	base := ckOrphanMkfs(t, "host", "64M", "-b", "1024")
	e2fsckClean(t, base)
	lf := uint32(11) // lost+found: an inode in use
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, im *ckImage)
		want string
	}{
		{"bad magic", func(t *testing.T, im *ckImage) {
			im.block(ckOrphanBlocks(t, im)[3])[im.bs-8] ^= 1
		}, "block 3: orphan file block magic"},
		{"bad checksum", func(t *testing.T, im *ckImage) {
			im.block(ckOrphanBlocks(t, im)[5])[im.bs-1] ^= 0x40
		}, "block 5: orphan file block checksum"},
		{"entry changed, checksum not", func(t *testing.T, im *ckImage) {
			binary.LittleEndian.PutUint32(im.block(ckOrphanBlocks(t, im)[0]), lf)
		}, "block 0: orphan file block checksum"},
		{"entry without orphan_present", func(t *testing.T, im *ckImage) {
			im.putOrphanEntries(t, 2, lf)
		}, "orphan_present is clear"},
		{"entry outside the inode range", func(t *testing.T, im *ckImage) {
			im.putOrphanEntries(t, 0, im.sb.InodesCount+1)
			im.setROCompat(disk.ROCompatOrphanPresent, true)
		}, "outside 11.."},
		{"entry a reserved inode", func(t *testing.T, im *ckImage) {
			im.putOrphanEntries(t, 0, 7)
			im.setROCompat(disk.ROCompatOrphanPresent, true)
		}, "is inode 7, outside"},
		{"entry a free inode", func(t *testing.T, im *ckImage) {
			im.putOrphanEntries(t, 1, 100)
			im.setROCompat(disk.ROCompatOrphanPresent, true)
		}, "entry 0 is a free inode"},
		{"entry listed twice", func(t *testing.T, im *ckImage) {
			im.putOrphanEntries(t, 0, lf)
			im.putOrphanEntries(t, 9, 0, 0, lf)
			im.setROCompat(disk.ROCompatOrphanPresent, true)
		}, "block 9 entry 2: the inode is already an orphan"},
		{"orphan_present with an empty file", func(t *testing.T, im *ckImage) {
			im.setROCompat(disk.ROCompatOrphanPresent, true)
		}, "orphan_present is set but the orphan file is empty"},
		{"orphan_present without orphan_file", func(t *testing.T, im *ckImage) {
			raw := im.b[disk.SuperblockOffset:]
			binary.LittleEndian.PutUint32(raw[0x5C:], uint32(disk.Compat(binary.LittleEndian.Uint32(raw[0x5C:]))&^disk.CompatOrphanFile))
			im.setROCompat(disk.ROCompatOrphanPresent, true)
		}, "orphan_present is set without orphan_file"},
		{"orphan file inode out of range", func(t *testing.T, im *ckImage) {
			binary.LittleEndian.PutUint32(im.b[disk.SuperblockOffset+0x280:], im.sb.InodesCount+5)
			im.fixSuper()
		}, "superblock: orphan file inode"},
		{"size not whole blocks", func(t *testing.T, im *ckImage) {
			in := im.inode(im.sb.OrphanFileInum)
			in.SetSize(in.Size() - 100)
			im.putInode(im.sb.OrphanFileInum, in)
		}, "is not a multiple of the block size"},
		{"hole at the end", func(t *testing.T, im *ckImage) {
			// i_size one block past the mapped ones.
			ino := im.sb.OrphanFileInum
			in := im.inode(ino)
			in.SetSize(in.Size() + uint64(im.bs))
			im.putInode(ino, in)
		}, "the orphan file has a hole at block 32 of 33"},
		{"unwritten extent (read as on disk)", func(t *testing.T, im *ckImage) {
			// Unwritten, and a bad magic in it: found.
			ino := im.sb.OrphanFileInum
			in := im.inode(ino)
			e := disk.DecodeExtent(in.Block[12:])
			e.Uninit = true
			e.EncodeInto(in.Block[12:])
			im.putInode(ino, in)
			im.block(e.Start + 1)[im.bs-5] ^= 1
		}, "block 1: orphan file block magic"},
		{"not a regular file", func(t *testing.T, im *ckImage) {
			in := im.inode(im.sb.OrphanFileInum)
			in.Mode = disk.ModeFifo | 0o600
			im.putInode(im.sb.OrphanFileInum, in)
		}, "orphan file inode is not a regular file"},
		{"no journal", func(t *testing.T, im *ckImage) {
			raw := im.b[disk.SuperblockOffset:]
			binary.LittleEndian.PutUint32(raw[0x5C:], binary.LittleEndian.Uint32(raw[0x5C:])&^uint32(disk.CompatHasJournal))
			im.fixSuper()
		}, "orphan_file is set on a volume without a journal"},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			p := ckCorrupted(t, base, tc.fn)
			r := ckFile(t, p)
			if err := r.Err(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check: %v\nwant a finding containing %q", err, tc.want)
			}
			code, out := ckE2fsck(t, p)
			if code == 0 {
				t.Errorf("e2fsck -fn is clean where Check says %v:\n%s", r.Err(), out)
			}
			t.Logf("e2fsck exit %d:\n%s", code, ckTrim(out))
		})
	}
}

// TestCheckOrphanFileExt4liteWrites: ext4lite writes into a volume mke2fs
// made with orphan_file (many files created and removed, a file unlinked
// while open); after Close both Check and e2fsck -fn find it clean, and so
// does a kernel mount (as root) that writes to it. ext4lite keeps its own
// orphans on the s_last_orphan chain, which the kernel reads too.
func TestCheckOrphanFileExt4liteWrites(t *testing.T) {
	for _, maker := range ckOrphanMakers {
		t.Run(maker, func(t *testing.T) {
			img := ckOrphanMkfs(t, maker, "64M", "-b", "4096")
			v, err := Open(img, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			if err := ckManyFiles(400, 9000)(v); err != nil {
				t.Fatal(err)
			}
			if err := ckChurn(v); err != nil {
				t.Fatal(err)
			}
			data := strings.Repeat("orphan", 3000)
			orphan := ckUnlinkOpen(t, v, "open-unlinked", data)
			r, err := v.Check(&CheckOptions{AllowOrphans: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Err(); err != nil {
				t.Fatalf("live volume with an open unlinked file (AllowOrphans): %v", err)
			}
			if err := v.WriteFile(&sink.Header{Path: "by-ext4lite", Mode: sink.TypeReg | 0o644, Size: int64(len(data))}, strings.NewReader(data)); err != nil {
				t.Fatal(err)
			}
			if err := v.Unref(orphan); err != nil {
				t.Fatal(err)
			}
			if err := v.Close(); err != nil {
				t.Fatal(err)
			}
			ckBothClean(t, img, "after ext4lite wrote")
			if os.Geteuid() != 0 {
				t.Log("not root: the kernel cross-check (a loop mount) left out; CI runs it as root")
				return
			}
			mnt := mount(t, img, "")
			if b, err := os.ReadFile(filepath.Join(mnt, "by-ext4lite")); err != nil || string(b) != data {
				t.Fatalf("kernel reads by-ext4lite: %d bytes, %v", len(b), err)
			}
			if err := os.WriteFile(filepath.Join(mnt, "by-kernel"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			umount(t, mnt)
			ckBothClean(t, img, "after the kernel wrote")
		})
	}
}

// TestCheckOrphanFileKernel: the kernel puts files unlinked while open into
// the orphan file. A copy of the volume taken then (under fsfreeze, so the
// journal is checkpointed: a crash copy without recovery pending) has
// orphan_present and entries: e2fsck -fn complains, Check reports the
// orphans, and with AllowOrphans accepts them, entries and checksums as the
// kernel wrote them. ext4lite refuses to open that copy read-write (it
// would have to free the orphans) but reads it. After umount both checkers
// find the volume clean.
func TestCheckOrphanFileKernel(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("fsfreeze"); err != nil {
		t.Skip("fsfreeze not installed (apt-get install util-linux)")
	}
	for _, maker := range ckOrphanMakers {
		t.Run(maker, func(t *testing.T) {
			img := ckOrphanMkfs(t, maker, "64M", "-b", "1024")
			mnt := mount(t, img, "")
			var open []*os.File
			for _, n := range []string{"a", "b", "c", "keep"} {
				if err := os.WriteFile(filepath.Join(mnt, n), []byte(strings.Repeat(n, 5000)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for _, n := range []string{"a", "b", "c"} {
				f, err := os.Open(filepath.Join(mnt, n))
				if err != nil {
					t.Fatal(err)
				}
				open = append(open, f)
				if err := os.Remove(filepath.Join(mnt, n)); err != nil {
					t.Fatal(err)
				}
			}
			if out, err := exec.Command("fsfreeze", "-f", mnt).CombinedOutput(); err != nil {
				t.Fatalf("fsfreeze -f: %v\n%s", err, out)
			}
			crash, err := os.ReadFile(img)
			if out, err2 := exec.Command("fsfreeze", "-u", mnt).CombinedOutput(); err2 != nil {
				t.Fatalf("fsfreeze -u: %v\n%s", err2, out)
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range open {
				f.Close()
			}
			umount(t, mnt)
			ckBothClean(t, img, "after umount")

			p := filepath.Join(t.TempDir(), "crash.ext4")
			if err := os.WriteFile(p, crash, 0o644); err != nil {
				t.Fatal(err)
			}
			im := ckLoad(t, p)
			if im.sb.FeatureROCompat&disk.ROCompatOrphanPresent == 0 || im.sb.FeatureIncompat&disk.IncompatRecover != 0 || im.sb.LastOrphan != 0 {
				t.Fatalf("frozen copy: ro_compat %#x, incompat %#x, s_last_orphan %d; want orphan_present, no recovery, no chain",
					im.sb.FeatureROCompat, im.sb.FeatureIncompat, im.sb.LastOrphan)
			}
			if code, out := ckE2fsck(t, p); code == 0 {
				t.Errorf("e2fsck -fn is clean on the kernel's orphans:\n%s", out)
			}
			r := ckFile(t, p)
			if len(r.Findings) != 1 || !strings.Contains(r.Err().Error(), "3 inode(s) in the orphan file") {
				t.Errorf("Check of the frozen copy: %v; want exactly the 3 orphans", r.Err())
			}
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			r, err = Check(f, &CheckOptions{AllowOrphans: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Err(); err != nil {
				t.Errorf("Check with AllowOrphans: %v", err)
			}
			if _, err := Open(p, nil); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "orphan_present") {
				t.Errorf("read-write open of a volume with orphans in its orphan file: %v, want ErrUnsupported naming orphan_present", err)
			}
			v, err := Open(p, &Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			rc, err := v.Open("keep")
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			if b, err := io.ReadAll(rc); err != nil || len(b) != 4*5000 {
				t.Errorf("read-only open: keep: %d bytes, %v", len(b), err)
			}
		})
	}
}

// TestShrinkMovesOrphanFile: Shrink moves an orphan file out of the groups
// it drops and re-seals each block's checksum, which covers the block
// number (before, the blocks were copied as they were and the kernel
// refused to mount the volume: "orphan file block N: bad checksum"). The
// orphan file is put at the end of the volume by tune2fs -O orphan_file on
// a volume that a filler file (removed by ext4lite before the shrink) kept
// full.
func TestShrinkMovesOrphanFile(t *testing.T) {
	for _, tool := range []string{"mke2fs", "tune2fs"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (apt-get install e2fsprogs)", tool)
		}
	}
	dir := t.TempDir()
	filler := make([]byte, 45<<20)
	for i := range filler {
		filler[i] = byte(i*7 + i>>12) // not zeros: mke2fs -d would leave holes
	}
	if err := os.WriteFile(filepath.Join(dir, "filler"), filler, 0o644); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(t.TempDir(), "vol.ext4")
	for _, args := range [][]string{
		{"mke2fs", "-q", "-F", "-t", "ext4", "-b", "1024", "-O", "^resize_inode,metadata_csum_seed", "-J", "size=1", "-d", dir, img, "64M"},
		{"tune2fs", "-O", "orphan_file", img},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			if strings.Contains(string(out), "orphan_file") {
				t.Skipf("the host's e2fsprogs does not know orphan_file (needs ≥ 1.47): %s", out)
			}
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	e2fsckClean(t, img)
	im := ckLoad(t, img)
	before := ckOrphanBlocks(t, im)[0]
	v, err := Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if err := v.Remove("filler"); err != nil {
		t.Fatal(err)
	}
	n, err := v.Shrink()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	im = ckLoad(t, img)
	after := ckOrphanBlocks(t, im)[0]
	if after == before || int64(before)*int64(im.bs) < n {
		t.Fatalf("the orphan file was at block %d, is at %d, volume now %d bytes: the test moved nothing", before, after, n)
	}
	ckBothClean(t, img, "after Shrink")
	if os.Geteuid() != 0 {
		t.Log("not root: the kernel mount (which verifies every orphan block) left out; CI runs it as root")
		return
	}
	mnt := mount(t, img, "")
	if err := os.WriteFile(filepath.Join(mnt, "by-kernel"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	umount(t, mnt)
	ckBothClean(t, img, "after the kernel wrote to the shrunk volume")
}
