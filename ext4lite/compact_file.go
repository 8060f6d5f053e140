package ext4lite

import "os"

// fileDevice adds hole punching and allocation size to an *os.File.
type fileDevice struct{ *os.File }

// punchDevice returns the device with the file's extra abilities: for a
// volume opened by path, and for one opened on an *os.File (OpenDevice,
// as rungv's gofer extension does).
func (v *FS) punchDevice() Device {
	if v.file != nil {
		return fileDevice{v.file}
	}
	if f, ok := v.dev.(*os.File); ok {
		return fileDevice{f}
	}
	return v.dev
}
