package hostcpu

import (
	"strconv"
	"strings"
)

// List writes cpus as a comma-separated list ("0,2,3").
func List(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

func contains(cpus []int, c int) bool {
	for _, x := range cpus {
		if x == c {
			return true
		}
	}
	return false
}
