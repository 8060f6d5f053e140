package erofs

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/sink"
)

// FuzzBuildRoundTrip drives the builder with sink calls decoded from the
// input (names of any length up to 255, sizes around block boundaries,
// links, removals, xattrs, ids and times), writes the image, and requires
// that our reader shows exactly the builder's tree and Check passes.
func FuzzBuildRoundTrip(f *testing.F) {
	f.Add([]byte("\x00\x05\x10\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b"))
	f.Add(bytes.Repeat([]byte{0, 200, 255, 1, 2, 7, 3, 9}, 20))
	f.Add([]byte{1, 255, 1, 0, 0, 2, 1, 3, 4, 5, 0, 1, 2, 3, 4, 5, 6, 7})
	capMinimize()
	f.Fuzz(func(t *testing.T, in []byte) {
		b := NewBuilder(Options{MemoryLimit: 1 << 20})
		defer b.Close()
		next := func() int {
			if len(in) == 0 {
				return 0
			}
			v := int(in[0])
			in = in[1:]
			return v
		}
		dirs := []string{"."}
		var files []string
		join := func(d, n string) string {
			if d == "." {
				return n
			}
			return d + "/" + n
		}
		for i := 0; len(in) > 0 && i < 64; i++ {
			op, dir := next()%7, dirs[next()%len(dirs)]
			nameLen := 1 + next()%255
			name := strings.Repeat(string(rune('a'+i%26)), nameLen)
			if next()%4 == 0 {
				name = fmt.Sprintf("%s%d", name[:nameLen-min(nameLen, 3)], i)
			}
			p := join(dir, name)
			h := &sink.Header{Path: p, UID: uint32(next()) << (8 * uint(next()%4)), GID: uint32(next()),
				Mtime: time.Unix(int64(next())<<20, int64(next())*1000)}
			if v := next(); v%3 == 0 {
				h.Xattrs = map[string][]byte{"user.x": bytes.Repeat([]byte{byte(v)}, v*3), "trusted.t": {1}}
			}
			var err error
			switch op {
			case 0:
				h.Mode = sink.TypeDir | 0o755
				if err = b.Mkdir(h); err == nil {
					dirs = append(dirs, p)
				}
			case 1, 2:
				size := next()*31 + next()%4*4096 - 4096 + next()%3 - 1
				size = max(size, 0)
				h.Mode, h.Size = sink.TypeReg|0o644, int64(size)
				if err = b.WriteFile(h, bytes.NewReader(payload(uint64(i), size))); err == nil {
					files = append(files, p)
				}
			case 3:
				h.Mode, h.Linkname = sink.TypeSymlink|0o777, strings.Repeat("t", 1+next()*16)
				err = b.Symlink(h)
			case 4:
				h.Mode, h.Devmajor, h.Devminor = []uint32{sink.TypeChar, sink.TypeBlock, sink.TypeFifo, sink.TypeSocket}[next()%4]|0o600, uint32(next()), uint32(next())
				err = b.Mknod(h)
			case 5:
				if len(files) > 0 {
					err = b.Link(files[next()%len(files)], p)
				}
			case 6:
				if len(files) > 0 {
					err = b.RemoveAll(files[next()%len(files)])
				}
			}
			_ = err // collisions and missing parents are fine: the tree is what it is
		}
		var buf bytes.Buffer
		if _, err := b.WriteTo(&buf); err != nil {
			t.Fatalf("WriteTo: %v", err)
		}
		im, err := Open(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatalf("Open of our own image: %v", err)
		}
		if _, err := im.Check(); err != nil {
			t.Fatalf("Check of our own image: %v", err)
		}
		compareTrees(t, b, im, cmpOpts{})
	})
}
