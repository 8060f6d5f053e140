//go:build linux

// Command fsyncbench is bench/fsync.sh's guest program: N times, it
// appends 4 KiB to one file in DIR and fsyncs it (a database's log, a
// bolt commit), and prints "DIR N WALL_NS": the wall time of the loop as
// the guest sees it. Static (CGO_ENABLED=0), so any image runs it.
//
// usage: fsyncbench DIR N
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: fsyncbench DIR N")
		os.Exit(2)
	}
	n, err := strconv.Atoi(os.Args[2])
	if err != nil || n < 0 {
		fmt.Fprintln(os.Stderr, "fsyncbench: N must be a count")
		os.Exit(2)
	}
	f, err := os.OpenFile(filepath.Join(os.Args[1], "fsyncbench.log"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fsyncbench:", err)
		os.Exit(1)
	}
	buf := make([]byte, 4096)
	t := time.Now()
	for i := 0; i < n; i++ {
		buf[0] = byte(i)
		if _, err := f.Write(buf); err != nil {
			fmt.Fprintln(os.Stderr, "fsyncbench:", err)
			os.Exit(1)
		}
		if err := f.Sync(); err != nil {
			fmt.Fprintln(os.Stderr, "fsyncbench:", err)
			os.Exit(1)
		}
	}
	fmt.Printf("%s %d %d\n", os.Args[1], n, time.Since(t).Nanoseconds())
}
