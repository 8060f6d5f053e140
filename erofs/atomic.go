package erofs

import (
	"fmt"
	"os"

	"z.gfire.dev/gvx/internal/durable"
)

// WriteFileAtomic publishes path (mode 0644) with the contents write puts
// in a temporary file beside it: the file is fsynced, renamed over path
// and the directory fsynced (durable.WriteFile), so a crash leaves either
// the old file or the whole new one, never a torn image. On error nothing
// is left behind; write's own error comes back as it is.
func WriteFileAtomic(path string, write func(f *os.File) error) error {
	var failed bool
	err := durable.WriteFile(path, 0o644, durable.Options{}, func(f *os.File) error {
		err := write(f)
		failed = err != nil
		return err
	})
	if err != nil && !failed {
		return fmt.Errorf("erofs: %w", err)
	}
	return err
}
