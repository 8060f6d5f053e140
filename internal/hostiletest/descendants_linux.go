package hostiletest

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// Descendants is pid and every process under it, by /proc's PPid (the
// tests that read the environment of an episode's host processes find
// them so).
func Descendants(pid int) []int {
	kids := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces and parentheses.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 {
			pp, _ := strconv.Atoi(f[1])
			kids[pp] = append(kids[pp], p)
		}
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, kids[out[i]]...)
	}
	return out
}
