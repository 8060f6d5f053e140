//go:build !linux && !darwin

package hostdir

import (
	"io/fs"

	"z.gfire.dev/gvx/sink"
)

// sysStat adds nothing on Windows and other systems: owners, inode numbers and link counts
// are not exposed through fs.FileInfo there.
func sysStat(fi fs.FileInfo, h *sink.Header) {}
