package overlay

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"z.gfire.dev/gvx/sink/sinktest"
)

// TestImportTarCut cuts a PAX archive (names too long for ustar, so each
// entry has an extended header block and a record block) at offsets all
// through it, inside the first PAX record block above all, and imports
// each cut serially and pipelined. archive/tar says io.EOF, not an error,
// for a stream that ends inside a record's padding (after the PAX records
// or an entry's data), which imported as an empty or short tree. A cut
// GNU tar -t refuses ("Unexpected EOF in archive") must be refused with
// ErrCorrupt; one ending at a record boundary where a header would start
// (no end-of-archive blocks, which GNU tar accepts) imports what GNU tar
// lists. The walk is stricter in one place: a cut inside a header block
// itself (archive/tar's io.ErrUnexpectedEOF) is refused, where GNU tar
// ignores a partial last block.
func TestImportTarCut(t *testing.T) {
	names := []string{strings.Repeat("long-name-", 12) + "a", strings.Repeat("other-", 20) + "b"}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i, n := range names {
		body := strings.Repeat("x", 100+i)
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	full := buf.Bytes()
	if full[156] != tar.TypeXHeader {
		t.Fatalf("the first header is type %q, want a PAX extended header", full[156])
	}
	var cuts []int
	for off := 1; off < len(full); off++ {
		if off%512 <= 1 || off%512 == 511 || off%23 == 0 || off > 512 && off < 1024 && off%3 == 0 {
			cuts = append(cuts, off) // every third offset in the first PAX record block
		}
	}
	gnu, haveGNU := exec.LookPath("tar")
	dir := t.TempDir()
	for _, off := range cuts {
		cut := full[:off]
		var gnuOK bool
		var gnuNames []string
		if haveGNU == nil {
			p := filepath.Join(dir, "cut.tar")
			if err := os.WriteFile(p, cut, 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			cmd := exec.Command(gnu, "-tf", p)
			cmd.Stdout, cmd.Stderr = &out, &errOut
			gnuOK = cmd.Run() == nil
			gnuNames = strings.Fields(out.String())
		}
		for _, serial := range []bool{true, false} {
			m := sinktest.NewMemFS()
			w, err := newWalker(m, modeImport, ".", newLimits(0, 0, 0))
			if err != nil {
				t.Fatal(err)
			}
			w.serial = serial
			werr := w.run(bytes.NewReader(cut))
			got, _ := m.ReadDir(".")
			slices.Sort(got)
			// Each entry is 4 blocks: PAX header, records, ustar header,
			// data; two zero blocks end the archive.
			inHeader := off%512 != 0 && ((off/512)%4 == 0 || (off/512)%4 == 2 || off >= 4*512*len(names))
			switch {
			case werr == nil && haveGNU == nil && !gnuOK:
				t.Errorf("cut at %d (serial %v): imported %q without an error; GNU tar refuses it", off, serial, got)
			case werr == nil && haveGNU == nil && !slices.Equal(got, sortedCopy(gnuNames)):
				t.Errorf("cut at %d (serial %v): imported %q, GNU tar lists %q", off, serial, got, gnuNames)
			case werr == nil && off%512 != 0:
				t.Errorf("cut at %d (serial %v), inside a record: imported %q without an error", off, serial, got)
			case werr != nil && !errors.Is(werr, ErrCorrupt):
				t.Errorf("cut at %d (serial %v): %v, want ErrCorrupt", off, serial, werr)
			case werr != nil && haveGNU == nil && gnuOK && !inHeader:
				t.Errorf("cut at %d (serial %v): %v; GNU tar accepts it, listing %q", off, serial, werr, gnuNames)
			}
			if off == 512+512 || off == 4*512 || off == 4*512+2*512 || off == 8*512 {
				if werr != nil {
					t.Errorf("cut at %d, a record boundary where a header would start: %v", off, werr)
				}
			}
		}
	}
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	if c == nil {
		c = []string{}
	}
	return c
}
