//go:build !linux && !darwin && !windows

package durable

import "errors"

// renameNoReplace: no exclusive rename here; Rename links instead.
func renameNoReplace(oldpath, newpath string) error { return errors.ErrUnsupported }
