package volcmd

import (
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
)

// progressReader counts bytes through a progress bar drawn on stderr when
// it is a terminal (never in scripts or CI logs).
type progressReader struct {
	io.Reader
	bar *progressbar.ProgressBar
}

func withProgress(r io.Reader, size int64, desc string) *progressReader {
	pr := &progressReader{Reader: r}
	if stderrIsTerminal() {
		pr.bar = progressbar.NewOptions64(size,
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionShowBytes(true),
			progressbar.OptionThrottle(100_000_000),
			progressbar.OptionClearOnFinish())
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
