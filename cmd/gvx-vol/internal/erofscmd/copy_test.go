package erofscmd

import (
	"errors"
	"io"
	"strings"
	"testing"

	"z.gfire.dev/gvx/erofs"
	"z.gfire.dev/gvx/sink"
)

// TestCopyTreeReportsWriteFileErrors: a file the image cannot hold must
// fail the build, not vanish from it.
func TestCopyTreeReportsWriteFileErrors(t *testing.T) {
	src := erofs.NewBuilder(erofs.Options{})
	defer src.Close()
	if err := src.WriteFile(&sink.Header{Path: "f", Mode: sink.TypeReg | 0o644, Size: 1}, strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	// A sink that refuses every file stands in for one EROFS cannot store.
	dst := erofs.NewBuilder(erofs.Options{})
	defer dst.Close()
	err := copyTree(refuseFiles{dst}, src)
	if !errors.Is(err, erofs.ErrUnsupported) {
		t.Fatalf("copyTree = %v, want the WriteFile error", err)
	}
}

type refuseFiles struct{ sink.Sink }

func (refuseFiles) WriteFile(h *sink.Header, _ io.Reader) error {
	return erofs.ErrUnsupported
}
