//go:build !linux

package gvx

import "errors"

// SetHostCPUs says that host CPU affinity is Linux only.
func (s *Sandbox) SetHostCPUs([]int) error {
	return errors.New("gvx: SetHostCPUs: host CPU affinity is Linux only")
}
