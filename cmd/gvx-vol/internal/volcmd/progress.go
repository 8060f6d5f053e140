package volcmd

import (
	"io"
	"os"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
)

// progressReader counts bytes through a progress line drawn on stderr when
// it is a terminal (never in scripts or CI logs).
type progressReader struct {
	io.Reader
	bar *cliutil.Progress
}

func withProgress(r io.Reader, size int64, desc string) *progressReader {
	pr := &progressReader{Reader: r}
	if stderrIsTerminal() {
		pr.bar = cliutil.NewProgress(os.Stderr, desc, size)
		pr.Reader = io.TeeReader(r, pr.bar)
	}
	return pr
}

func finishProgress(pr *progressReader) error {
	if pr.bar != nil {
		return pr.bar.Finish()
	}
	return nil
}
