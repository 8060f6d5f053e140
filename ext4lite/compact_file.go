package ext4lite

import "os"

// fileDevice adds hole punching and allocation size to an *os.File.
type fileDevice struct{ *os.File }

// punchDevice returns the device with the file's extra abilities.
func (v *FS) punchDevice() Device {
	if v.file != nil {
		return fileDevice{v.file}
	}
	return v.dev
}
