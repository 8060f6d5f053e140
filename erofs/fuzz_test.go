package erofs

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"testing"

	"z.gfire.dev/gvx/sink"
)

// seedImages are small images exercising every record the reader parses:
// compact and extended inodes, inline and plain data, multi-block
// directories, inline and shared xattrs, devices and symlinks.
func seedImages(t testing.TB) [][]byte {
	var out [][]byte
	for _, prof := range []Profile{ProfileFull, ProfileRuntime} {
		b := NewBuilder(Options{Profile: prof})
		must := func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		}
		must(b.Mkdir(&sink.Header{Path: "d", Mode: sink.TypeDir | 0o755, UID: 70000, Xattrs: map[string][]byte{"trusted.overlay.opaque": []byte("y"), "user.s": []byte("shared")}}))
		for i := range 32 { // two directory blocks, few entries: keeps inputs small
			must(b.Mknod(&sink.Header{Path: fmt.Sprintf("d/%03d-%s", i, strings.Repeat("x", 120)), Mode: sink.TypeFifo | 0o644}))
		}
		must(b.WriteFile(&sink.Header{Path: "d/f", Mode: 0o644, Size: 5000, Xattrs: map[string][]byte{"user.s": []byte("shared"), "security.x": []byte("1")}}, bytes.NewReader(payload(1, 5000))))
		must(b.WriteFile(&sink.Header{Path: "small", Mode: 0o600, Size: 10}, strings.NewReader("0123456789")))
		must(b.Link("small", "hard"))
		must(b.Symlink(&sink.Header{Path: "ln", Linkname: "d/f"}))
		must(b.Mknod(&sink.Header{Path: "blk", Mode: sink.TypeBlock | 0o600, Devmajor: 8, Devminor: 1}))
		var buf bytes.Buffer
		if _, err := b.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		b.Close()
		out = append(out, buf.Bytes())
	}
	return out
}

// FuzzReader feeds damaged images to Open and walks whatever opens: every
// failure must be a clean error (no panic, hang or huge allocation), and
// the walk is bounded even when directories loop.
func FuzzReader(f *testing.F) {
	for _, img := range seedImages(f) {
		f.Add(img)
	}
	capMinimize()
	f.Fuzz(fuzzReader)
}

// capMinimize limits input minimization to 200 runs unless the caller set
// -fuzzminimizetime: with multi-KiB inputs the default (up to 60 s per new
// input) stalls a 10 s CI fuzz run at 0 execs/s.
func capMinimize() {
	if fl := flag.Lookup("test.fuzzminimizetime"); fl != nil && fl.Value.String() == "1m0s" {
		fl.Value.Set("200x")
	}
}

func fuzzReader(t *testing.T, data []byte) {
	{
		im, err := Open(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("Open: unexpected error kind: %v", err)
			}
			return
		}
		budget := 500
		var walk func(p string, depth int)
		walk = func(p string, depth int) {
			if budget--; budget < 0 || depth > 40 {
				return
			}
			h, err := im.Lstat(p)
			if err != nil {
				checkErr(t, err)
				return
			}
			switch h.Type() {
			case sink.TypeDir:
				names, err := im.ReadDir(p)
				if err != nil {
					checkErr(t, err)
					return
				}
				for _, n := range names {
					if checkPath("fuzz", n) != nil {
						continue // our reader returned a name a sink would refuse: fine, skip
					}
					walk(path.Join(p, n), depth+1)
				}
			case sink.TypeReg:
				r, err := im.Open(p)
				if err != nil {
					checkErr(t, err)
					return
				}
				n, err := io.Copy(io.Discard, r)
				if err != nil {
					checkErr(t, err)
				} else if n != h.Size {
					t.Fatalf("%s: read %d bytes of %d", p, n, h.Size)
				}
			}
		}
		walk(".", 0)
		if _, err := im.Check(); err != nil {
			checkErr(t, err)
		}
	}
}

func checkErr(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnsupported) || errors.Is(err, fs.ErrNotExist) ||
		errors.Is(err, sink.ErrSymlinkInPath) || errors.Is(err, errNotDir) || errors.Is(err, fs.ErrInvalid) {
		return
	}
	t.Fatalf("unexpected error kind: %v", err)
}

// TestReaderBitFlips checks that every byte flipped in the superblock's
// block is caught at Open by the checksum.
func TestReaderBitFlips(t *testing.T) {
	seeds := seedImages(t)
	for _, img := range seeds {
		for off := 1024; off < 1024+128+64*40; off++ {
			if off >= 1032 && off < 1036 {
				continue // feature_compat: clearing SB_CHKSUM turns the check off, as in the kernel
			}
			d := bytes.Clone(img)
			d[off] ^= 0xff
			if _, err := Open(bytes.NewReader(d), int64(len(d))); err == nil && off < 4096 {
				t.Fatalf("flip at %d not caught by the superblock checksum", off)
			}
		}
	}
}
