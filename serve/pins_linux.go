package serve

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// hostCPUs are the CPUs this process may run on.
func hostCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) == 0 {
		return nil, fmt.Errorf("this process may run on no CPU")
	}
	return cpus, nil
}
