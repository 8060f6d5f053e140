//go:build !linux

package serve

import "errors"

func hostCPUs() ([]int, error) { return nil, errors.New("pinning episodes to CPUs is Linux only") }
