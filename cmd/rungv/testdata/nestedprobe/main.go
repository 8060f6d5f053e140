// Command nestedprobe is a guest program for TestNestedEpisode and
// TestNestedFaultViolations (busybox cannot make these accesses or speak
// to a unix socket):
//
//	nestedprobe ok              legitimate accesses that fault in on demand:
//	                            read then write fresh anonymous pages, write a
//	                            private file mapping (copy on write), run code
//	                            in a page made executable; prints "ok"
//	nestedprobe unmapped        reads a page that was unmapped
//	nestedprobe rowrite         writes a read-only page
//	nestedprobe noexec          jumps into a readable, writable, non-executable page
//	nestedprobe dial PATH MSG   connects to the unix socket PATH, writes MSG,
//	                            prints what comes back until EOF (10 s at most)
//	nestedprobe syscalls        16 threads each make 6000 system calls whose
//	                            answer is known (futex FUTEX_WAKE_PRIVATE: 0;
//	                            lseek to an offset: that offset) with
//	                            floating point values live across each call;
//	                            prints every wrong answer and "syscalls N bad M"
//	nestedprobe churn           64 goroutines on 8 threads pass a token in a ring
//	                            with timers, for 3 s (the Go runtime's futex and
//	                            signal traffic); prints "churn N"
//	nestedprobe lowmap          maps the first free page from 0x68000 up (where an
//	                            outer gVisor keeps its trap table), writes a
//	                            secret in it, prints "mapped ADDR" and exits
//	nestedprobe lowread [ADDR]  reads ADDR (0x68000) without mapping it: dies of
//	                            SIGSEGV or reads what this process has there;
//	                            the secret means another process's memory
//	                            was still mapped there
//
// The three violations must die of SIGSEGV (Go prints "unexpected fault
// address" and "signal SIGSEGV"); printing "survived" means the access was
// let through.
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: nestedprobe ok|unmapped|rowrite|noexec|dial PATH MSG")
		os.Exit(2)
	}
	page := os.Getpagesize()
	switch os.Args[1] {
	case "ok":
		ok(page)
		return
	case "unmapped":
		b := mmap(page, unix.PROT_READ|unix.PROT_WRITE)
		if err := unix.Munmap(b); err != nil {
			fail("munmap", err)
		}
		fmt.Println("read", *(*byte)(unsafe.Pointer(&b[0])))
	case "rowrite":
		b := mmap(page, unix.PROT_READ)
		fmt.Println("read", b[0]) // the page is readable
		b[1] = 1
	case "noexec":
		b := mmap(page, unix.PROT_READ|unix.PROT_WRITE)
		b[0] = 0xc3 // ret (amd64); arm64 faults on fetch too
		call(b)
	case "lowmap":
		// The first free page from 0x68000 up: gVisor's own trap table
		// (syscall patching) may hold one in [0x60000, 0x70000).
		for a := uintptr(lowAddr); a < 0x70000; a += uintptr(page) {
			b, err := unix.MmapPtr(-1, 0, unsafe.Pointer(a), uintptr(page), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED_NOREPLACE)
			if err != nil {
				continue
			}
			copy(unsafe.Slice((*byte)(b), page), lowSecret)
			fmt.Printf("mapped %#x\n", a)
			return
		}
		fail("mmap", fmt.Errorf("no free page in [0x68000, 0x70000)"))
	case "lowread":
		var a uintptr = lowAddr
		if len(os.Args) > 2 {
			fmt.Sscanf(os.Args[2], "0x%x", &a)
		}
		// Whether this process has a mapping there at all (its own trap
		// table, say): if not, a read that succeeds reads memory left
		// over from another process.
		mapped := false
		if maps, err := os.ReadFile("/proc/self/maps"); err == nil {
			for _, l := range strings.Split(string(maps), "\n") {
				var lo, hi uintptr
				if n, _ := fmt.Sscanf(l, "%x-%x", &lo, &hi); n == 2 && lo <= a && a < hi {
					mapped = true
				}
			}
		}
		fmt.Printf("own mapping: %v\n", mapped)
		got := unsafe.Slice((*byte)(unsafe.Pointer(a)), len(lowSecret))
		fmt.Printf("read %q\n", got)
		if !mapped {
			fmt.Println("read unmapped memory")
		}
	case "syscalls":
		syscalls()
		return
	case "churn":
		churn()
		return
	case "dial":
		if len(os.Args) != 4 {
			fail("usage", fmt.Errorf("dial PATH MSG"))
		}
		c, err := net.DialTimeout("unix", os.Args[2], 10*time.Second)
		if err != nil {
			fail("dial", err)
		}
		// A relay that accepted and then died must not keep the caller
		// (a test's script) waiting for ever.
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, os.Args[3]); err != nil {
			fail("write", err)
		}
		if uc, ok := c.(*net.UnixConn); ok {
			uc.CloseWrite()
		}
		if _, err := io.Copy(os.Stdout, c); err != nil {
			fail("read", err)
		}
		return
	default:
		fail("usage", fmt.Errorf("unknown case %q", os.Args[1]))
	}
	fmt.Println("survived", os.Args[1])
	os.Exit(0)
}

func ok(page int) {
	// Fresh anonymous pages: read first, then write, then read back.
	a := mmap(64*page, unix.PROT_READ|unix.PROT_WRITE)
	sum := 0
	for i := 0; i < len(a); i += page {
		sum += int(a[i])
	}
	for i := 0; i < len(a); i += page {
		a[i] = byte(i / page)
	}
	for i := 0; i < len(a); i += page {
		if a[i] != byte(i/page) {
			fail("anonymous", fmt.Errorf("page %d reads %d", i/page, a[i]))
		}
	}
	// A private file mapping: read, then write (copy on write).
	f, err := os.CreateTemp("", "nestedprobe")
	if err != nil {
		fail("create", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(make([]byte, 4*page)); err != nil {
		fail("write", err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, 4*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
	if err != nil {
		fail("mmap file", err)
	}
	for i := 0; i < len(m); i += page {
		sum += int(m[i])
		m[i+1] = 7
	}
	// Code in a page made executable.
	c := mmap(page, unix.PROT_READ|unix.PROT_WRITE)
	c[0] = 0xc3
	if err := unix.Mprotect(c, unix.PROT_READ|unix.PROT_EXEC); err != nil {
		fail("mprotect", err)
	}
	call(c)
	fmt.Println("ok", sum, m[1])
}

// lowAddr and lowSecret are nestedprobe lowmap's page and what it writes.
const (
	lowAddr   = 0x68000
	lowSecret = "another process's secret"
)

func mmap(n, prot int) []byte {
	b, err := unix.Mmap(-1, 0, n, prot, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		fail("mmap", err)
	}
	return b
}

// call calls the code at b[0] as a func().
func call(b []byte) {
	code := uintptr(unsafe.Pointer(&b[0]))
	p := &code
	f := *(*func())(unsafe.Pointer(&p))
	f()
}

func fail(what string, err error) {
	fmt.Fprintln(os.Stderr, "nestedprobe:", what+":", err)
	os.Exit(1)
}

// syscalls makes system calls with known answers from many threads at once
// and reports each wrong one (number, arguments, answer, errno).
func syscalls() {
	const threads, rounds = 16, 3000
	var words [threads * 16]uint32
	var calls, bad atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < threads; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			runtime.LockOSThread()
			f, err := os.CreateTemp("", "nestedprobe")
			if err != nil {
				fail("create", err)
			}
			defer os.Remove(f.Name())
			defer f.Close()
			fd := f.Fd()
			x := float64(i) + 0.5
			for r := 0; r < rounds; r++ {
				addr := uintptr(unsafe.Pointer(&words[i*16]))
				v, _, e := unix.RawSyscall6(unix.SYS_FUTEX, addr, 129 /* FUTEX_WAKE_PRIVATE */, 1, 0, 0, 0)
				if v != 0 || e != 0 {
					bad.Add(1)
					fmt.Printf("thread %d round %d: futex(%#x, FUTEX_WAKE_PRIVATE, 1) = %d, errno %d (%v)\n", i, r, addr, int64(v), e, e)
				}
				off := uintptr(r*64 + i)
				v, _, e = unix.RawSyscall(unix.SYS_LSEEK, fd, off, 0)
				if v != off || e != 0 {
					bad.Add(1)
					fmt.Printf("thread %d round %d: lseek(%d, %d, SEEK_SET) = %d, errno %d (%v)\n", i, r, fd, off, int64(v), e, e)
				}
				if want := float64(i) + 0.5 + float64(r); x+float64(r) != want {
					bad.Add(1)
					fmt.Printf("thread %d round %d: a float register changed across a system call: %v, want %v\n", i, r, x+float64(r), want)
				}
				calls.Add(2)
			}
		}(i)
	}
	wg.Wait()
	fmt.Println("syscalls", calls.Load(), "bad", bad.Load())
}

// churn passes a token around a ring of goroutines, each also arming a timer,
// for 3 s with 8 Ps: the Go runtime parks and wakes threads (futex) and
// preempts goroutines (SIGURG) all the time.
func churn() {
	runtime.GOMAXPROCS(8)
	const n = 64
	chans := make([]chan int, n)
	for i := range chans {
		chans[i] = make(chan int, 1)
	}
	var passes atomic.Int64
	done := make(chan struct{})
	for i := 0; i < n; i++ {
		go func(i int) {
			t := time.NewTimer(time.Millisecond)
			for {
				select {
				case v := <-chans[i]:
					passes.Add(1)
					t.Reset(time.Duration(i%5) * time.Millisecond)
					chans[(i+1)%n] <- v + 1
				case <-t.C:
					t.Reset(time.Millisecond)
				case <-done:
					return
				}
			}
		}(i)
	}
	for i := 0; i < 8; i++ {
		chans[i*8] <- 0
	}
	// Busy goroutines for preemption.
	for i := 0; i < 4; i++ {
		go func() {
			x := 0
			for {
				select {
				case <-done:
					return
				default:
				}
				for j := 0; j < 1000000; j++ {
					x += j
				}
			}
		}()
	}
	time.Sleep(3 * time.Second)
	close(done)
	fmt.Println("churn", passes.Load() > 0)
}
