package sink_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/sinktest"
)

// failingSink refuses every regular file.
type failingSink struct{ sink.Sink }

var errRefused = errors.New("refused")

func (f failingSink) WriteFile(h *sink.Header, r io.Reader) error { return errRefused }

// TestCopyReportsWriteFileErrors is the regression test for a shadowed
// error that made Copy report success when a file could not be written.
func TestCopyReportsWriteFileErrors(t *testing.T) {
	src := sinktest.NewMemFS()
	if err := src.WriteFile(&sink.Header{Path: "f", Mode: sink.TypeReg | 0o644, Size: 2}, strings.NewReader("hi")); err != nil {
		t.Fatal(err)
	}
	err := sink.Copy(failingSink{sinktest.NewMemFS()}, src)
	if !errors.Is(err, errRefused) {
		t.Fatalf("Copy = %v, want the sink's error", err)
	}
}
