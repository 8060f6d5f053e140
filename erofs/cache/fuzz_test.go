package cache

import (
	"bytes"
	"testing"
)

// FuzzParseIndex: any bytes give an index or an error, never a panic, and
// what parses re-encodes to bytes that parse to the same encoding.
func FuzzParseIndex(f *testing.F) {
	f.Add([]byte(`{"version":1,"entries":{}}`))
	f.Add([]byte(`{"version":1,"entries":{"r":{"objects":["` + hexA + `.erofs"],"meta":{"k":[1,2]}}}}`))
	f.Add([]byte(`{"version":1,"entries":{"r":{"objects":["../x"]}}}`))
	f.Add([]byte(`{"version":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ix, err := ParseIndex(b)
		if err != nil {
			return
		}
		enc, err := ix.Marshal()
		if err != nil {
			t.Fatalf("parsed index does not marshal: %v", err)
		}
		ix2, err := ParseIndex(enc)
		if err != nil {
			t.Fatalf("re-encoded index does not parse: %v\n%s", err, enc)
		}
		enc2, _ := ix2.Marshal()
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not stable:\n%s\n%s", enc, enc2)
		}
	})
}
