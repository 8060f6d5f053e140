//go:build !linux

package erofs

import (
	"errors"
	"os"

	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/hostdir"
)

// hostRoot and hostFile exist on Linux only: elsewhere AddDir spools.
type hostRoot struct{}

func (r *hostRoot) close() error { return nil }

type hostFile struct{}

func (f *hostFile) open(int64, *dirCache, bool) (*hostFD, error) {
	return nil, errors.New("erofs: no host files here")
}

type dirCache struct{}

func newDirCache() *dirCache { return &dirCache{} }
func (c *dirCache) close()   {}

type hostFD struct{ *os.File }

func (h *hostFD) readWhole([]byte) error { return errors.New("erofs: no host files here") }

// AddDir adds the host directory tree at root to the builder's root, as
// sink.Copy from sink/hostdir does (on Linux it scans in parallel and
// reads file data at WriteTo instead).
func (b *Builder) AddDir(root string) error {
	d := hostdir.New(root)
	defer d.Close()
	return sink.Copy(b, d)
}
