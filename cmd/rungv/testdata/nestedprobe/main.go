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
