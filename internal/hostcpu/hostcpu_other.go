//go:build !linux

package hostcpu

import "errors"

// Allowed says that CPU affinity is Linux only.
func Allowed() ([]int, error) { return nil, errors.New("host CPU affinity is Linux only") }

// PinProcesses says that CPU affinity is Linux only.
func PinProcesses(func() []int, []int) error { return errors.New("host CPU affinity is Linux only") }
