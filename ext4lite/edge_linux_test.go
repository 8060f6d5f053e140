package ext4lite

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/sinktest"
)

// TestDeepExtentTree writes a file of 3000 separate extents (every other
// block), which needs an extent tree of depth 2, and has e2fsck and Linux
// read it back.
func TestDeepExtentTree(t *testing.T) {
	v, img := newVolume(t, 256<<20)
	if err := v.WriteFile(&sink.Header{Path: "frag", Mode: sink.TypeReg | 0o644}, bytes.NewReader(nil)); err != nil {
		t.Fatal(err)
	}
	f, err := v.OpenFile("frag")
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 6000*4096)
	for i := 0; i < 6000; i += 2 {
		blk := bytes.Repeat([]byte{byte(i/2) | 1}, 4096)
		copy(want[i*4096:], blk)
		if _, err := f.WriteAt(blk, int64(i)*4096); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(int64(len(want))); err != nil {
		t.Fatal(err)
	}
	if n := len(f.in.ext.ext); n != 3000 {
		t.Fatalf("%d extents, want 3000", n)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	e2fsckClean(t, img)
	r, err := Open(img, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	in, err := r.lookup("frag")
	if err != nil {
		t.Fatal(err)
	}
	if depth := in.d.Block[6]; depth < 2 {
		t.Errorf("extent tree depth %d, want at least 2", depth)
	}
	got := make([]byte, len(want))
	rf, _ := r.OpenFile("frag")
	if _, err := rf.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("fragmented file reads back differently")
	}
	needRoot(t)
	mnt := mount(t, img, "ro")
	out, err := exec.Command("cmp", filepath.Join(mnt, "frag"), "-").CombinedOutput()
	_ = out
	cmd := exec.Command("cmp", filepath.Join(mnt, "frag"), "-")
	cmd.Stdin = bytes.NewReader(want)
	if out, err = cmd.CombinedOutput(); err != nil {
		t.Fatalf("the kernel reads the fragmented file differently: %v %s", err, out)
	}
}

// TestSmallBlockSizes formats with 1 KiB and 2 KiB blocks (what mkfs.ext4
// picks for small volumes), writes a random tree and has e2fsck and Linux
// check it. (RandomTree's largest xattrs need 4 KiB blocks; xattrs are
// covered at that size.)
func TestSmallBlockSizes(t *testing.T) {
	for _, bs := range []int{1024, 2048} {
		t.Run(itoa(bs), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "v.ext4")
			uuid := [16]byte{byte(bs >> 8)}
			v, err := Create(p, 96<<20, &CreateOptions{BlockSize: bs, UUID: &uuid, Time: time.Unix(1700000000, 0)})
			if err != nil {
				t.Fatal(err)
			}
			want := sinktest.NewMemFS()
			for _, s := range []sink.Sink{want, v} {
				if err := sinktest.RandomTree(s, rand.New(rand.NewPCG(uint64(bs), 1)), sinktest.TreeOptions{Entries: 600, NoXattrs: true}); err != nil {
					t.Fatal(err)
				}
			}
			if err := v.RemoveAll("lost+found"); err != nil {
				t.Fatal(err)
			}
			if err := v.Close(); err != nil {
				t.Fatal(err)
			}
			e2fsckClean(t, p)
			needRoot(t)
			mnt := mount(t, p, "ro")
			opts := kernelCompare
			opts.IgnoreRoot = true
			if err := sinktest.Compare(want, hostSrc(t, mnt), opts); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestRefuseUnsupportedFeatures: volumes with features ext4lite does not
// implement are refused by name, never opened for writing.
func TestRefuseUnsupportedFeatures(t *testing.T) {
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("mkfs.ext4 not installed")
	}
	for _, c := range []struct{ opt, name string }{
		{"inline_data", "inline_data"},
		{"meta_bg,^resize_inode", "meta_bg"},
		{"encrypt", "encrypt"},
		{"casefold", "casefold"},
		{"bigalloc", "bigalloc"},
		{"quota", "quota"},
	} {
		p := filepath.Join(t.TempDir(), "v.ext4")
		if out, err := exec.Command("mkfs.ext4", "-F", "-q", "-O", c.opt, p, "64M").CombinedOutput(); err != nil {
			t.Logf("mkfs.ext4 -O %s: %v %s (skipped)", c.opt, err, out)
			continue
		}
		v, err := Open(p, nil)
		if err == nil {
			v.Close()
			t.Errorf("-O %s: opened for writing", c.opt)
			continue
		}
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("-O %s: %v, want ErrUnsupported naming %s", c.opt, err, c.name)
		}
	}
}

// TestDenseInodes: one inode per 4 KiB (mkfs.ext4 -i 4096) makes inode
// tables that fill whole groups; they spill into the next groups.
func TestDenseInodes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "v.ext4")
	v, err := Create(p, 4<<30, &CreateOptions{InodeRatio: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.WriteFile(&sink.Header{Path: "f", Mode: sink.TypeReg | 0o644, Size: 2}, strings.NewReader("ok")); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	e2fsckClean(t, p)
}
