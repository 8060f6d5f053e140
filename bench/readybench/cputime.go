package main

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// treeCPU is the CPU time pid's process and its descendants have used
// so far, every thread's (the first field of /proc/PID/task/TID/schedstat:
// time on a CPU, in ns), found through each thread's children. Processes
// that exited before are not counted (an episode's are all alive until
// it ends). 0 for a pid that is gone.
func treeCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	var total time.Duration
	todo := []int{pid}
	for len(todo) > 0 {
		p := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		dir := "/proc/" + strconv.Itoa(p) + "/task/"
		tasks, _ := os.ReadDir(dir)
		for _, t := range tasks {
			if b, err := os.ReadFile(dir + t.Name() + "/schedstat"); err == nil {
				if f := strings.Fields(string(b)); len(f) > 0 {
					ns, _ := strconv.ParseInt(f[0], 10, 64)
					total += time.Duration(ns)
				}
			}
			b, _ := os.ReadFile(dir + t.Name() + "/children")
			for _, c := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(c); err == nil {
					todo = append(todo, n)
				}
			}
		}
	}
	return total
}
