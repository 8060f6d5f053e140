package erofs

import (
	"bytes"
	"testing"

	"z.gfire.dev/gvx/erofs/erofstest"
)

type (
	treeSpec = erofstest.TreeSpec
	cmpOpts  = erofstest.CmpOpts
)

var (
	populate     = erofstest.Populate
	compareTrees = erofstest.Compare
	readAll      = erofstest.ReadAll
	payload      = erofstest.Payload
)

// build writes b's image to memory and opens it with our reader.
func build(t testing.TB, b *Builder) ([]byte, *Image) {
	t.Helper()
	var buf bytes.Buffer
	if _, err := b.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := Open(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), img
}
