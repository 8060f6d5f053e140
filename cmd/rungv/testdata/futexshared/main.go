// Command futexshared checks, as a guest, that shared (not
// FUTEX_PRIVATE) futex wakes between two processes are not lost: the
// protocol of gVisor's systrap stub and its Sentry (an inner Sentry and
// its stub are two processes of the outer gVisor sharing a MAP_SHARED
// memfd page at different addresses), also what PostgreSQL, Python
// multiprocessing and process-shared pthread mutexes rely on.
//
// A (this process) and B (a child) share one page: a memfd mapped
// MAP_SHARED by both at different addresses (B is this program
// re-executed, the memfd its fd 3), or with -anon a MAP_SHARED|MAP_ANONYMOUS
// page inherited over a raw fork (B then runs only raw system calls). For
// each round A increments the state word and FUTEX_WAKEs it; B, which
// loops on FUTEX_WAIT(state, the value it read) until the state is the one
// it expects, writes a reply and FUTEX_WAKEs the word until one waiter is
// woken; A waits for the reply in FUTEX_WAIT(state) with a 50 ms timeout.
// Signals (tgkill to both waiting threads, an ITIMER_REAL in each), spinning
// threads and, with -punch, hole punching and refaulting of the memfd's
// other pages or, with -churn, mapping and unmapping memory in both (the
// stub's requests are mmap and munmap) race with the waits.
//
// A round whose reply does not come within 1 s while B is blocked waiting
// on a value that is no longer the word's (a second wake finds it queued)
// prints "lost at N"; that second wake lets B go on.
// At the end the counts of wakes that reported a waiter woken and of waits
// that returned 0 must match in both directions (a wait counted as woken
// but restarted or timed out is a lost wake too). The last line is
// "ok N: ..." with the wake counts (exit 0) or "lost K of N ..." (exit 1).
//
//	futexshared [-anon] [-punch] [-churn] [-spin K] [-n N]
package main

import (
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/debug"
	"sync/atomic"
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

const (
	pageSize = 4096
	fileSize = 256 * pageSize // the state page and 255 pages to punch

	// Offsets of the shared page's fields.
	offState  = 0  // uint32: A increments it, B waits for it
	offRet    = 8  // uint64: B's reply, pending until it comes
	offStop   = 16 // uint32: B exits at the next request
	offBWait  = 20 // uint32: the value B is waiting on, plus 1 (0: not in FUTEX_WAIT)
	offBTid   = 24 // uint32: B's waiting thread
	offBZero  = 28 // uint32: B's FUTEX_WAITs that returned 0
	offBWakes = 32 // uint32: B's FUTEX_WAKEs that returned 1
	offATid   = 36 // uint32: A's waiting thread (B signals it before replying)
	offAPid   = 40 // uint32
	offChurn  = 44 // uint32: B maps, touches and unmaps memory for each request

	pending = ^uint64(0)
)

// page is the shared mapping (outside Go's heap: mmap'd).
type page struct{ p unsafe.Pointer }

func (p page) u32(off uintptr) *uint32 { return (*uint32)(unsafe.Add(p.p, off)) }
func (p page) u64(off uintptr) *uint64 { return (*uint64)(unsafe.Add(p.p, off)) }

// ptr converts an address mmap returned (memory Go does not manage).
func ptr(addr uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&addr)) }

// mmapAt maps length bytes of fd (or anonymous memory if fd < 0) shared,
// at hint if the kernel agrees.
func mmapAt(hint uintptr, fd int, length uintptr) (page, error) {
	flags := uintptr(unix.MAP_SHARED)
	if fd < 0 {
		flags |= unix.MAP_ANONYMOUS
	}
	r, _, e := unix.Syscall6(unix.SYS_MMAP, hint, length, unix.PROT_READ|unix.PROT_WRITE, flags, uintptr(fd), 0)
	if e != 0 {
		return page{}, e
	}
	return page{ptr(r)}, nil
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == "-child" {
		child()
		return
	}
	n := flag.Int("n", 3000, "round trips")
	anon := flag.Bool("anon", false, "share a MAP_SHARED|MAP_ANONYMOUS page over a raw fork instead of a memfd over fork+exec")
	punch := flag.Bool("punch", false, "punch holes in, and refault, the memfd's other pages meanwhile")
	churn := flag.Bool("churn", false, "B maps, touches and unmaps 1 MiB for each request; A does the same meanwhile")
	spin := flag.Int("spin", 1, "threads spinning on sched_yield")
	flag.Parse()
	if *punch && *anon {
		fmt.Println("-punch needs the memfd (not -anon)")
		os.Exit(2)
	}
	os.Exit(run(*n, *anon, *punch, *churn, *spin))
}

// child is B after the re-execution: the memfd is fd 3.
func child() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGUSR1, syscall.SIGALRM)
	p, err := mmapAt(0x6f0000000000, 3, fileSize)
	if err != nil {
		fmt.Println("child mmap:", err)
		os.Exit(2)
	}
	runtime.LockOSThread()
	unix.Setitimer(unix.ITIMER_REAL, unix.Itimerval{Interval: unix.Timeval{Usec: 1000}, Value: unix.Timeval{Usec: 1000}})
	serve(p, false)
}

// serve is B: the stub's syscall_loop. It uses raw system calls only, no
// allocation (after a raw fork only this thread exists).
func serve(p page, itimer bool) {
	if itimer {
		it := [4]int64{0, 1000, 0, 1000}
		unix.RawSyscall(unix.SYS_SETITIMER, unix.ITIMER_REAL, uintptr(unsafe.Pointer(&it)), 0)
	}
	tid, _, _ := unix.RawSyscall(unix.SYS_GETTID, 0, 0, 0)
	atomic.StoreUint32(p.u32(offBTid), uint32(tid))
	state := uintptr(p.p) + offState
	expect := uint32(1)
	for {
		for {
			s := atomic.LoadUint32(p.u32(offState))
			if s == expect {
				break
			}
			atomic.StoreUint32(p.u32(offBWait), s+1)
			_, _, e := unix.RawSyscall6(unix.SYS_FUTEX, state, futexWait, uintptr(s), 0, 0, 0)
			atomic.StoreUint32(p.u32(offBWait), 0)
			if e == 0 {
				atomic.AddUint32(p.u32(offBZero), 1)
			}
		}
		if atomic.LoadUint32(p.u32(offStop)) != 0 {
			unix.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
		}
		// The request (the stub's munmap): a signal to A races with the reply.
		if atomic.LoadUint32(p.u32(offChurn)) != 0 {
			m, _, e := unix.RawSyscall6(unix.SYS_MMAP, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS, ^uintptr(0), 0)
			if e == 0 {
				*(*byte)(unsafe.Add(ptr(m), 4096*(expect%256))) = 1
				unix.RawSyscall(unix.SYS_MUNMAP, m, 1<<20, 0)
			}
		}
		unix.RawSyscall(unix.SYS_TGKILL, uintptr(atomic.LoadUint32(p.u32(offAPid))), uintptr(atomic.LoadUint32(p.u32(offATid))), uintptr(syscall.SIGUSR1))
		atomic.StoreUint64(p.u64(offRet), uint64(expect))
		for {
			r, _, _ := unix.RawSyscall6(unix.SYS_FUTEX, state, futexWake, 1, 0, 0, 0)
			if r == 1 {
				break
			}
			unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		}
		atomic.AddUint32(p.u32(offBWakes), 1)
		expect++
	}
}

// growStack makes the goroutine's stack large so that serve never grows it
// in a raw-forked child (growing it there could wait for a lock held by a
// thread the child does not have).
func growStack(d int) byte {
	var b [1024]byte
	b[d%1024] = byte(d)
	if d == 0 {
		return b[0]
	}
	return growStack(d-1) + b[d%1024]
}

func run(n int, anon, punch, churn bool, spin int) int {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGUSR1, syscall.SIGALRM)
	runtime.LockOSThread()
	fd := -1
	if !anon {
		var err error
		if fd, err = unix.MemfdCreate("futexshared", 0); err != nil {
			fmt.Println("memfd_create:", err)
			return 2
		}
		if err := unix.Ftruncate(fd, fileSize); err != nil {
			fmt.Println("ftruncate:", err)
			return 2
		}
	}
	p, err := mmapAt(0x5e0000000000, fd, fileSize)
	if err != nil {
		fmt.Println("mmap:", err)
		return 2
	}
	atomic.StoreUint32(p.u32(offATid), uint32(unix.Gettid()))
	atomic.StoreUint32(p.u32(offAPid), uint32(os.Getpid()))
	atomic.StoreUint64(p.u64(offRet), pending)
	if churn {
		atomic.StoreUint32(p.u32(offChurn), 1)
	}

	var bpid int
	if anon {
		debug.SetGCPercent(-1)
		growStack(64)
		syscall.ForkLock.Lock()
		r, _, e := unix.RawSyscall6(unix.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
		if e == 0 && r == 0 {
			serve(p, true) // the child; never returns
		}
		syscall.ForkLock.Unlock()
		if e != 0 {
			fmt.Println("fork:", e)
			return 2
		}
		bpid = int(r)
	} else {
		cmd := exec.Command("/proc/self/exe", "-child")
		cmd.ExtraFiles = []*os.File{os.NewFile(uintptr(fd), "memfd")}
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			fmt.Println("start B:", err)
			return 2
		}
		bpid = cmd.Process.Pid
	}
	defer func() {
		atomic.StoreUint32(p.u32(offStop), 1)
		atomic.AddUint32(p.u32(offState), 1)
		unix.Syscall6(unix.SYS_FUTEX, uintptr(p.p)+offState, futexWake, 1, 0, 0, 0)
		var ws unix.WaitStatus
		unix.Wait4(bpid, &ws, 0, nil)
	}()
	for atomic.LoadUint32(p.u32(offBTid)) == 0 {
		time.Sleep(time.Millisecond)
	}
	btid := int(atomic.LoadUint32(p.u32(offBTid)))
	atid := unix.Gettid()

	// Pressure.
	var done atomic.Bool
	defer done.Store(true)
	for i := 0; i < spin; i++ {
		go func() {
			runtime.LockOSThread()
			for !done.Load() {
				unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) // not Raw: the P goes to the main thread
			}
		}()
	}
	go func() {
		pid := os.Getpid()
		for !done.Load() {
			unix.Tgkill(bpid, btid, unix.SIGUSR1)
			unix.Tgkill(pid, atid, unix.SIGUSR1)
			time.Sleep(time.Duration(rand.Intn(200)) * time.Microsecond)
		}
	}()
	if punch {
		go func() {
			for !done.Load() {
				pg := 1 + rand.Intn(fileSize/pageSize-1)
				unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, int64(pg*pageSize), pageSize)
				*p.u32(uintptr(pg) * pageSize) = uint32(pg) // refault
				time.Sleep(time.Duration(rand.Intn(100)) * time.Microsecond)
			}
		}()
	}
	if churn {
		for k := 0; k < 2; k++ { // two churning goroutines
			go func() {
				for i := 0; !done.Load(); i++ {
					m, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
					if err == nil {
						m[4096*(i%256)] = 1
						unix.Munmap(m)
					}
					time.Sleep(time.Duration(rand.Intn(100)) * time.Microsecond)
				}
			}()
		}
	}
	unix.Setitimer(unix.ITIMER_REAL, unix.Itimerval{Interval: unix.Timeval{Usec: 1000}, Value: unix.Timeval{Usec: 1000}})
	defer unix.Setitimer(unix.ITIMER_REAL, unix.Itimerval{})

	state := uintptr(p.p) + offState
	var lost, awakes, azero uint32
	for i := 0; i < n; i++ {
		atomic.StoreUint64(p.u64(offRet), pending)
		s := atomic.AddUint32(p.u32(offState), 1)
		r, _, _ := unix.Syscall6(unix.SYS_FUTEX, state, futexWake, 1, 0, 0, 0)
		woke := r
		awakes += uint32(r)
		start := time.Now()
		reported := false
		for {
			ts := unix.Timespec{Nsec: 50 * 1000 * 1000}
			_, _, e := unix.Syscall6(unix.SYS_FUTEX, state, futexWait, uintptr(s), uintptr(unsafe.Pointer(&ts)), 0, 0)
			if e == 0 {
				azero++
			}
			if atomic.LoadUint64(p.u64(offRet)) != pending {
				// Let B's wake loop end before the next request.
				for atomic.LoadUint32(p.u32(offBWakes)) != uint32(i+1) {
					ts := unix.Timespec{Nsec: 10 * 1000 * 1000}
					if _, _, e := unix.Syscall6(unix.SYS_FUTEX, state, futexWait, uintptr(s), uintptr(unsafe.Pointer(&ts)), 0, 0); e == 0 {
						azero++
					}
				}
				break
			}
			el := time.Since(start)
			if el > time.Second && !reported {
				// B still waits on an old value: a second wake that
				// finds it queued proves the first one lost (a B merely
				// descheduled before its FUTEX_WAIT is not counted).
				if bw := atomic.LoadUint32(p.u32(offBWait)); bw != 0 && bw-1 != s {
					r, _, _ := unix.Syscall6(unix.SYS_FUTEX, state, futexWake, 1, 0, 0, 0)
					awakes += uint32(r)
					if r == 1 {
						fmt.Printf("lost at %d: B waited on %d for %v, the word is %d; A's wake had woken %d\n", i, bw-1, el.Round(time.Millisecond), s, woke)
						lost++
						reported = true
					}
				}
			}
			if el > 20*time.Second {
				fmt.Printf("stuck at %d: no reply for %v (B's wait field %d: the value it waits on plus 1, or 0; the word is %d)\n", i, el.Round(time.Millisecond), atomic.LoadUint32(p.u32(offBWait)), s)
				return 1
			}
		}
	}
	bzero, bwakes := atomic.LoadUint32(p.u32(offBZero)), atomic.LoadUint32(p.u32(offBWakes))
	if lost != 0 || awakes != bzero || bwakes != azero {
		fmt.Printf("lost %d of %d; A->B wakes %d, B woken %d; B->A wakes %d, A woken %d\n", lost, n, awakes, bzero, bwakes, azero)
		return 1
	}
	fmt.Printf("ok %d: A->B wakes %d, B->A wakes %d\n", n, awakes, bwakes)
	return 0
}
