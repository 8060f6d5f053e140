package fuzz

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/ext4lite/ext4test"
	"z.gfire.dev/gvx/sink"
)

// ext4Seed is one seed image.
type ext4Seed struct {
	name string
	img  []byte
}

// ext4Variants are the mkfs.ext4 feature variants seeded (size, options).
var ext4Variants = []struct {
	name, size string
	opts       []string
}{
	{"1k", "4M", []string{"-b", "1024"}},
	{"4k", "8M", []string{"-b", "4096"}},
	{"1k-desc128", "4M", []string{"-b", "1024", "-O", "64bit", "-E", "desc_size=128"}},
	{"1k-nocsum", "4M", []string{"-b", "1024", "-O", "^metadata_csum"}},
	{"1k-32bit", "4M", []string{"-b", "1024", "-O", "^64bit"}},
	{"4k-32bit", "8M", []string{"-b", "4096", "-O", "^64bit"}},
}

var (
	seedOnce  sync.Once
	seedImgs  []ext4Seed
	seedJrnl  []ext4Seed // images with committed, unreplayed transactions
	seedErr   error
	seedTools bool
)

func have(tools ...string) bool {
	for _, t := range tools {
		if _, err := exec.LookPath(t); err != nil {
			return false
		}
	}
	return true
}

// ext4Seeds returns the seed images: with mkfs.ext4 and debugfs, each
// variant filled by ext4lite (fillTree), and for the journal variants the
// same with debugfs transactions committed on top; without the tools,
// ext4lite's own 1k and 4k images.
func ext4Seeds(t testing.TB) (plain, withJournal []ext4Seed) {
	seedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gvx-fuzz-seeds-")
		if err != nil {
			seedErr = err
			return
		}
		defer os.RemoveAll(dir)
		seedTools = have("mkfs.ext4", "debugfs")
		if !seedTools {
			for _, bs := range []int{1024, 4096} {
				p := filepath.Join(dir, fmt.Sprintf("gvx-%d.img", bs))
				v, err := ext4lite.Create(p, 4<<20, &ext4lite.CreateOptions{BlockSize: bs, UUID: &[16]byte{1}, Time: time.Unix(1700000000, 0)})
				if err == nil {
					err = fillTree(v)
				}
				if err == nil {
					err = v.Close()
				}
				if err != nil {
					seedErr = err
					return
				}
				b, _ := os.ReadFile(p)
				seedImgs = append(seedImgs, ext4Seed{fmt.Sprintf("gvx-%d", bs), b})
			}
			return
		}
		for _, vr := range ext4Variants {
			p := filepath.Join(dir, vr.name+".img")
			args := append([]string{"-q", "-F", "-U", "6776780a-0000-4000-8000-000000000001", "-E", "hash_seed=6776780a-0000-4000-8000-000000000002"}, vr.opts...)
			args = append(args, p, vr.size)
			cmd := exec.Command("mkfs.ext4", args...)
			cmd.Env = append(os.Environ(), "E2FSPROGS_FAKE_TIME=1700000000")
			if out, err := cmd.CombinedOutput(); err != nil {
				seedErr = fmt.Errorf("mkfs.ext4 %v: %v\n%s", args, err, out)
				return
			}
			v, err := ext4lite.Open(p, &ext4lite.Options{Now: func() time.Time { return time.Unix(1700000000, 0) }})
			if err == nil {
				err = fillTree(v)
				if cerr := v.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				seedErr = fmt.Errorf("%s: %w", vr.name, err)
				return
			}
			b, _ := os.ReadFile(p)
			seedImgs = append(seedImgs, ext4Seed{vr.name, b})
			for _, open := range []string{"jo -c", "jo"} {
				j, err := journaled(dir, p, vr.name, open)
				if err != nil {
					seedErr = err
					return
				}
				seedJrnl = append(seedJrnl, j)
			}
		}
	})
	if seedErr != nil {
		t.Fatal(seedErr)
	}
	return seedImgs, seedJrnl
}

// journaled copies img and commits three transactions on it with
// debugfs (journal open is "jo -c", checksum v3, or "jo"): blocks of file
// "data" rewritten, one of them revoked again, so replay has work to do.
func journaled(dir, img, name, open string) (ext4Seed, error) {
	p := filepath.Join(dir, name+"-j.img")
	b, err := os.ReadFile(img)
	if err != nil {
		return ext4Seed{}, err
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		return ext4Seed{}, err
	}
	v, err := ext4lite.Open(p, &ext4lite.Options{ReadOnly: true})
	if err != nil {
		return ext4Seed{}, err
	}
	ino, err := v.Lookup(ext4lite.RootIno, "data")
	var ext []ext4lite.FileExtent
	if err == nil {
		ext, err = v.FileExtents(ino)
	}
	v.Close()
	if err != nil || len(ext) == 0 {
		return ext4Seed{}, fmt.Errorf("%s: extents of data: %v", name, err)
	}
	bs := int64(1024)
	if strings.HasPrefix(name, "4k") {
		bs = 4096
	}
	one := filepath.Join(dir, "one")
	os.WriteFile(one, bytes.Repeat([]byte{0xA5}, int(bs)), 0o644)
	two := filepath.Join(dir, "two")
	os.WriteFile(two, bytes.Repeat([]byte{0x5A}, 2*int(bs)), 0o644)
	b0 := ext[0].VolumeAt / bs
	cmds := fmt.Sprintf("%s\njw -b %d %s\njw -b %d,%d %s\njw -r %d\njc\n", open, b0, one, b0+1, b0+2, two, b0+2)
	script := filepath.Join(dir, "cmds")
	os.WriteFile(script, []byte(cmds), 0o644)
	if out, err := exec.Command("debugfs", "-w", "-f", script, p).CombinedOutput(); err != nil {
		return ext4Seed{}, fmt.Errorf("debugfs: %v\n%s", err, out)
	}
	jb, err := os.ReadFile(p)
	suffix := "-jcsum"
	if open == "jo" {
		suffix = "-jplain"
	}
	return ext4Seed{name + suffix, jb}, err
}

// fillTree writes what every seed holds: ext4test.SeedTree (each
// structure the readers parse at least once, as in ext4lite's own seeds)
// plus "data", four contiguous blocks the journal seeds rewrite.
func fillTree(v *ext4lite.FS) error {
	bs := v.BlockSize()
	if err := ext4test.SeedTree(v, bs); err != nil {
		return err
	}
	data := bytes.Repeat([]byte("data"), bs)
	return v.WriteFile(&sink.Header{Path: "data", Mode: sink.TypeReg | 0o644, Size: int64(len(data)), Mtime: time.Unix(1700000000, 0)}, bytes.NewReader(data))
}
