// Command futexwake checks, as a guest, that a FUTEX_WAKE reported as
// having woken a waiter ends that waiter's FUTEX_WAIT even when a signal
// reaches the waiter at the same moment (Linux: the wait returns 0, the
// handler runs). gVisor's systrap stub relies on it: it calls FUTEX_WAKE
// until one waiter is woken and then moves on, so a wait that the kernel
// restarts after counting the wake blocks for ever (an inner Sentry's
// wait for its stub's reply, nested).
//
// A waiter thread FUTEX_WAITs on a word nobody changes; the main thread
// sends it SIGUSR1 (Go's handler, SA_RESTART) and at once FUTEX_WAKEs
// until one waiter is woken, N times. It prints "ok N", or "lost at I"
// and exits 1 when a counted wake did not end the wait within 5 s.
//
//	futexwake [N]
package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Linux's futex operations (golang.org/x/sys/unix has no names for them).
const (
	futexWait = 0
	futexWake = 1
)

func main() {
	n := 3000
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	signal.Notify(make(chan os.Signal, 1), syscall.SIGUSR1)
	var word uint32
	addr := uintptr(unsafe.Pointer(&word))
	tids := make(chan int)
	woke := make(chan struct{}, 1)
	go func() {
		runtime.LockOSThread()
		tids <- unix.Gettid()
		for {
			for {
				_, _, e := unix.Syscall6(unix.SYS_FUTEX, addr, futexWait, 0, 0, 0, 0)
				if e == 0 {
					break
				}
				if e != unix.EAGAIN && e != unix.EINTR {
					fmt.Println("futex wait:", e)
					os.Exit(2)
				}
			}
			woke <- struct{}{}
		}
	}()
	tid, pid := <-tids, os.Getpid()
	for i := 0; i < n; i++ {
		if err := unix.Tgkill(pid, tid, unix.SIGUSR1); err != nil {
			fmt.Println("tgkill:", err)
			os.Exit(2)
		}
		for {
			r, _, e := unix.Syscall6(unix.SYS_FUTEX, addr, futexWake, 1, 0, 0, 0)
			if e != 0 {
				fmt.Println("futex wake:", e)
				os.Exit(2)
			}
			if r == 1 {
				break
			}
			runtime.Gosched()
		}
		select {
		case <-woke:
		case <-time.After(5 * time.Second):
			fmt.Println("lost at", i)
			os.Exit(1)
		}
	}
	fmt.Println("ok", n)
}
