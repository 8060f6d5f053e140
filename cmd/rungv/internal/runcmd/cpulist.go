package runcmd

import (
	"fmt"
	"strconv"
	"strings"
)

// maxCPUList bounds the CPUs one --host-cpus list may name (a range like
// 0-4000000000 is a typo, not a machine).
const maxCPUList = 4096

// parseCPUList reads a CPU list as taskset -c and cpuset.cpus write it:
// comma-separated numbers and inclusive ranges ("1", "0,2", "0-3,8").
func parseCPUList(s string) ([]int, error) {
	var cpus []int
	seen := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("%q: want a CPU number or a range like 0-3", part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("%q: want a range like 0-3, low to high", part)
			}
		}
		if b >= maxCPUList {
			return nil, fmt.Errorf("%q: CPU numbers stop at %d", part, maxCPUList-1)
		}
		for c := a; c <= b; c++ {
			if !seen[c] {
				seen[c] = true
				cpus = append(cpus, c)
			}
		}
	}
	return cpus, nil
}
