package reflink

import (
	"bytes"
	"errors"
	"fmt"
	"os"
)

// Probe tells whether files in dir can be cloned into dir: nil if they
// can, an error wrapping ErrNotSupported (a *NotSupportedError naming the
// filesystem) if the filesystem cannot, another error if the probe itself
// failed (dir missing, read-only, full). It clones a small temporary file
// for real, because no filesystem advertises reflink support reliably (XFS
// made without reflink=1 and ext4 both look like "maybe" from statfs), and
// removes everything it made.
func Probe(dir string) error {
	sf, err := os.CreateTemp(dir, ".reflink-probe-*")
	if err != nil {
		return fmt.Errorf("reflink: probe %s: %w", dir, err)
	}
	defer os.Remove(sf.Name())
	defer sf.Close()
	// One full block of non-zero data: a clone of an empty file or of a
	// hole proves nothing on some filesystems.
	if _, err := sf.Write(bytes.Repeat([]byte("gvx!"), zeroBlock/4)); err != nil {
		return fmt.Errorf("reflink: probe %s: %w", dir, err)
	}
	dst, err := withTemp(sf.Name()+"-clone", func(name string) error {
		_, _, err := cloneNew(sf, name, 0o600, false)
		return err
	})
	if err == nil {
		return os.Remove(dst)
	}
	if isNotSupported(err) {
		return notSupported(sf.Name(), dir, err)
	}
	return fmt.Errorf("reflink: probe %s: %w", dir, err)
}

// Supported reports whether dir's filesystem can clone files: (false, nil)
// means it cannot; an error means the probe could not tell (see Probe).
func Supported(dir string) (bool, error) {
	err := Probe(dir)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, ErrNotSupported) {
		return false, nil
	}
	return false, err
}
