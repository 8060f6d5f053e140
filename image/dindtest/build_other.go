//go:build !linux

package dindtest

import "context"

// Build needs Linux (debootstrap, chroot): elsewhere it returns
// ErrUnsupported.
func Build(ctx context.Context, dir string) (string, error) { return "", ErrUnsupported }

// Build needs Linux: elsewhere it returns ErrUnsupported.
func (f Flavour) Build(ctx context.Context, dir string) (string, error) { return "", ErrUnsupported }
