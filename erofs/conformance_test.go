package erofs

import (
	"bytes"
	"io"
	"testing"

	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/sinktest"
)

// EROFS stores one time per inode: no atime, ctime or crtime.
func init() {
	sinktest.ConformanceCompare.IgnoreAtime = true
}

// TestConformance runs the shared sink suite against the Builder, reading
// back through the Builder itself.
func TestConformance(t *testing.T) {
	sinktest.Conformance(t, func() (sink.Sink, sink.Source) {
		b := NewBuilder(Options{TempDir: t.TempDir()})
		t.Cleanup(func() { b.Close() })
		return b, b
	})
}

// TestConformanceImage runs it again, reading every answer from a freshly
// written image through Open: what the suite checks survives the disk.
func TestConformanceImage(t *testing.T) {
	sinktest.Conformance(t, func() (sink.Sink, sink.Source) {
		b := NewBuilder(Options{TempDir: t.TempDir()})
		t.Cleanup(func() { b.Close() })
		return b, &imageView{t: t, b: b}
	})
}

// imageView is a sink.Source that reads b's image, rewritten whenever b
// changed. EROFS keeps no atime and the suite's header check cannot be told
// so: Lstat borrows atime from the builder, everything else comes from disk.
type imageView struct {
	t   *testing.T
	b   *Builder
	gen uint64
	im  *Image
}

func (v *imageView) img() *Image {
	if v.im != nil && v.gen == v.b.gen {
		return v.im
	}
	var buf bytes.Buffer
	if _, err := v.b.WriteTo(&buf); err != nil {
		v.t.Fatal(err)
	}
	im, err := Open(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		v.t.Fatal(err)
	}
	v.im, v.gen = im, v.b.gen
	return im
}

func (v *imageView) Lstat(p string) (*sink.Header, error) {
	h, err := v.img().Lstat(p)
	if err == nil {
		if bh, berr := v.b.Lstat(p); berr == nil {
			h.Atime = bh.Atime
		}
	}
	return h, err
}

func (v *imageView) ReadDir(p string) ([]string, error)   { return v.img().ReadDir(p) }
func (v *imageView) Open(p string) (io.ReadCloser, error) { return v.img().Open(p) }
