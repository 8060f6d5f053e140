package runtime

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/runtime/lockdown"
)

// The lockdown is irreversible, so every test locks down a child: the test
// binary re-executed with lockdownChildEnv naming what to run. The child
// plays the attacker once it is locked down and prints one "FAIL:" line per
// attack that worked (and per thing it needs that did not), then
// "lockdown-ok".

const lockdownChildEnv = "GVX_LOCKDOWN_CHILD"

var atFDCWD = unix.AT_FDCWD

// lockdownChildren are the children's programs, by name.
var lockdownChildren = map[string]func(c *lockedChild){
	"host":               hostChild,
	"host-nat":           hostNATChild,
	"supervisor":         supervisorChild,
	"supervisor-cgroups": supervisorCgroupsChild,
	"init":               initChild,
	"x32":                x32Child,
}

func TestMain(m *testing.M) {
	if name := os.Getenv(lockdownChildEnv); name != "" {
		c := &lockedChild{}
		lockdownChildren[name](c)
		if c.failed {
			os.Exit(1)
		}
		os.Stdout.WriteString("lockdown-ok\n")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runLockedChild runs child name with env and returns its output, failing t
// unless it ended with lockdown-ok.
func runLockedChild(t *testing.T, name string, env ...string) string {
	t.Helper()
	if builtWithCgo {
		t.Skip("the lockdown needs CGO_ENABLED=0 (syscall.AllThreadsSyscall)")
	}
	cmd := exec.Command(os.Args[0])
	// What the child makes it cannot remove once locked down: it goes
	// with the test's directory.
	cmd.Env = append(append(os.Environ(), lockdownChildEnv+"="+name, "TMPDIR="+t.TempDir()), env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.HasSuffix(out, []byte("lockdown-ok\n")) {
		t.Fatalf("locked-down child %s: %v\n%s", name, err, out)
	}
	return string(out)
}

type lockedChild struct{ failed bool }

func (c *lockedChild) fail(format string, args ...any) {
	c.failed = true
	fmt.Printf("FAIL: "+format+"\n", args...)
}

// refused checks that err is EPERM (what the allowlist answers), naming
// the attack.
func (c *lockedChild) refused(what string, err error) {
	if !errors.Is(err, unix.EPERM) {
		c.fail("%s: got %v, want EPERM from the seccomp allowlist", what, err)
	}
}

// denied checks that err is EPERM (seccomp) or, where the kernel has
// Landlock, EACCES (Landlock).
func (c *lockedChild) denied(what string, err error) {
	if !errors.Is(err, unix.EPERM) && !(errors.Is(err, unix.EACCES) && landlockAvailable) {
		c.fail("%s: got %v, want EPERM (seccomp) or EACCES (Landlock)", what, err)
	}
}

// landlockAvailable is whether the kernel has Landlock (asked before any
// lockdown: landlock_create_ruleset is refused after).
var landlockAvailable = lockdown.LandlockABI() > 0

func (c *lockedChild) works(what string, err error) {
	if err != nil {
		c.fail("%s (needed after lockdown): %v", what, err)
	}
}

func (c *lockedChild) must(what string, err error) {
	if err != nil {
		c.fail("%s (before lockdown): %v", what, err)
		os.Exit(1)
	}
}

func errnoErr(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func rawSyscall(nr uintptr, a ...uintptr) error {
	var args [6]uintptr
	copy(args[:], a)
	_, _, e := unix.Syscall6(nr, args[0], args[1], args[2], args[3], args[4], args[5])
	return errnoErr(e)
}

// prepared is what a child sets up before it locks down, as a real host
// process has its pipes, children and sockets from its setup.
type prepared struct {
	pidfd  int       // a pidfd of the child itself
	child  *exec.Cmd // a started child (sleep), for wait and kill
	dir    string    // a directory tree to remove afterwards
	file   string    // an existing file
	sock   int       // an AF_INET socket (for bind)
	pr, pw *os.File  // a pipe
	status *os.File  // /proc/self/status (Landlock may refuse it later)
	capEff string    // the CapEff it must have once locked down
	abi    int       // Landlock's ABI (0: none)
	remove func()    // removes dir (removeState)
}

func prepareChild(c *lockedChild) *prepared {
	p := &prepared{}
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	c.must("pidfd_open", err)
	p.pidfd = fd
	p.child = exec.Command("sleep", "100")
	c.must("start a child", p.child.Start())
	p.dir, err = os.MkdirTemp("", "lockdown-")
	c.must("mkdir", err)
	c.must("tree", os.MkdirAll(filepath.Join(p.dir, "a", "b"), 0o755))
	p.file = filepath.Join(p.dir, "a", "file")
	c.must("file", os.WriteFile(p.file, []byte("x"), 0o644))
	p.sock, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	c.must("socket", err)
	p.pr, p.pw, err = os.Pipe()
	c.must("pipe", err)
	p.status, err = os.Open("/proc/self/status")
	c.must("status", err)
	p.capEff = "0000000000000000"
	p.abi = lockdown.LandlockABI()
	p.remove = removeState(p.dir)
	return p
}

// attacks are what every profile refuses: each is a step of a known host
// escape, privilege gain or snooping on another process.
func (c *lockedChild) attacks(p *prepared) {
	_, _ = p.status.Seek(0, io.SeekStart)
	st, _ := io.ReadAll(p.status)
	if !bytes.Contains(st, []byte("NoNewPrivs:\t1")) || !bytes.Contains(st, []byte("Seccomp:\t2")) {
		c.fail("status: %s", st)
	}
	if capEff(st) != p.capEff {
		c.fail("capabilities: CapEff %s, want %s", capEff(st), p.capEff)
	}
	// io_uring: its operations bypass seccomp; setting one up is refused,
	// and ringSocketConnect shows what it would reach otherwise.
	c.refused("io_uring_setup", ioUringSetup())
	c.refused("io_uring_enter", rawSyscall(unix.SYS_IO_URING_ENTER, 0, 1, 1, 1))
	c.refused("io_uring_register", rawSyscall(unix.SYS_IO_URING_REGISTER, 0, 0, 0, 0))
	if sock := os.Getenv("GVX_LOCKDOWN_UNIX_TARGET"); sock != "" {
		c.refused("io_uring socket+connect to a host unix service", ringSocketConnect(sock))
	}
	// Other processes' memory and descriptors.
	_, err := unix.PidfdOpen(os.Getppid(), 0)
	c.refused("pidfd_open", err)
	_, err = unix.PidfdGetfd(p.pidfd, 1, 0)
	c.refused("pidfd_getfd", err)
	buf := make([]byte, 8)
	local := []unix.Iovec{{Base: &buf[0], Len: 8}}
	remote := []unix.RemoteIovec{{Base: uintptr(unsafe.Pointer(&buf[0])), Len: 8}}
	_, err = unix.ProcessVMReadv(os.Getppid(), local, remote, 0)
	c.refused("process_vm_readv", err)
	_, err = unix.ProcessVMWritev(os.Getppid(), local, remote, 0)
	c.refused("process_vm_writev", err)
	c.refused("process_madvise", rawSyscall(unix.SYS_PROCESS_MADVISE, uintptr(p.pidfd), uintptr(unsafe.Pointer(&local[0])), 1, unix.MADV_COLD, 0))
	c.refused("ptrace(PTRACE_TRACEME)", rawSyscall(unix.SYS_PTRACE, unix.PTRACE_TRACEME))
	c.refused("ptrace(PTRACE_ATTACH, parent)", rawSyscall(unix.SYS_PTRACE, unix.PTRACE_ATTACH, uintptr(os.Getppid())))
	_, err = unix.FcntlInt(p.pr.Fd(), unix.F_SETOWN, os.Getppid())
	c.refused("fcntl(F_SETOWN, parent)", err)
	_, err = unix.FcntlInt(p.pr.Fd(), unix.F_SETSIG, int(unix.SIGKILL))
	c.refused("fcntl(F_SETSIG)", err)
	_, err = unix.FcntlInt(p.pr.Fd(), unix.F_SETLEASE, unix.F_RDLCK)
	c.refused("fcntl(F_SETLEASE)", err)
	c.refused("flock", unix.Flock(int(p.pr.Fd()), unix.LOCK_EX))
	// /proc/PID of another process is a pidfd too.
	if fd, err := unix.Open(fmt.Sprintf("/proc/%d", os.Getppid()), unix.O_RDONLY|unix.O_DIRECTORY, 0); err != nil {
		c.denied("open /proc/<parent> (for pidfd_send_signal)", err)
	} else {
		c.denied("pidfd_send_signal(/proc/<parent>)", rawSyscall(unix.SYS_PIDFD_SEND_SIGNAL, uintptr(fd), 0, 0, 0))
	}
	c.refused("kill(parent)", unix.Kill(os.Getppid(), 0))
	c.refused("kill(-1)", unix.Kill(-1, 0))
	c.refused("tgkill(parent)", unix.Tgkill(os.Getppid(), os.Getppid(), 0))
	// New programs and privileges.
	c.refused("execve", rawExec("/bin/true"))
	c.refused("execveat", rawSyscall(unix.SYS_EXECVEAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(bytePtr("/bin/true"))), 0, 0, 0))
	if err := exec.Command("/bin/true").Run(); !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EACCES) {
		c.fail("os/exec: got %v, want EPERM (or EACCES from Landlock)", err)
	}
	c.refused("setuid", rawSyscall(unix.SYS_SETUID, 0))
	c.refused("setresuid", rawSyscall(unix.SYS_SETRESUID, 0, 0, 0))
	c.refused("capset", unix.Capset(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &unix.CapUserData{}))
	c.refused("prctl(PR_SET_DUMPABLE, 1)", unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0))
	c.refused("prctl(PR_SET_PDEATHSIG)", unix.Prctl(unix.PR_SET_PDEATHSIG, 0, 0, 0, 0))
	c.refused("seccomp (another filter)", rawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_STRICT, 0, 0))
	// Namespaces and mounts.
	c.refused("unshare(CLONE_NEWUSER)", unix.Unshare(unix.CLONE_NEWUSER))
	c.refused("unshare(CLONE_NEWNS)", unix.Unshare(unix.CLONE_NEWNS))
	c.refused("setns", unix.Setns(p.pidfd, 0))
	c.refused("clone(CLONE_NEWUSER)", rawClone(unix.CLONE_NEWUSER|uintptr(unix.SIGCHLD)))
	// (The kernel itself refuses a new user namespace for a thread, with
	// EINVAL: this clone never makes a thread on the caller's stack.)
	c.refused("clone(CLONE_NEWUSER|CLONE_THREAD)", rawClone(unix.CLONE_NEWUSER|unix.CLONE_THREAD|unix.CLONE_SIGHAND|unix.CLONE_VM))
	c.refused("fork (clone without CLONE_THREAD)", rawClone(uintptr(unix.SIGCHLD)))
	if err := rawSyscall(unix.SYS_CLONE3, 0, 0); !errors.Is(err, unix.ENOSYS) {
		c.fail("clone3: got %v, want ENOSYS (so that Go falls back to clone)", err)
	}
	c.refused("mount", unix.Mount("none", p.dir, "tmpfs", 0, ""))
	c.refused("umount2", unix.Unmount("/proc", unix.MNT_DETACH))
	_, err = unix.Fsopen("tmpfs", 0)
	c.refused("fsopen", err)
	_, err = unix.OpenTree(unix.AT_FDCWD, "/", unix.OPEN_TREE_CLONE)
	c.refused("open_tree", err)
	c.refused("move_mount", unix.MoveMount(-1, "", -1, "", 0))
	c.refused("pivot_root", unix.PivotRoot(p.dir, p.dir))
	c.refused("chroot", unix.Chroot(p.dir))
	// Kernel attack surface.
	c.refused("bpf", rawSyscall(unix.SYS_BPF, 0, 0, 0))
	c.refused("perf_event_open", rawSyscall(unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0), 0))
	c.refused("userfaultfd", rawSyscall(unix.SYS_USERFAULTFD, 0))
	c.refused("keyctl", rawSyscall(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, 0, 0))
	c.refused("add_key", rawSyscall(unix.SYS_ADD_KEY, 0, 0, 0, 0, 0))
	c.refused("request_key", rawSyscall(unix.SYS_REQUEST_KEY, 0, 0, 0, 0))
	c.refused("init_module", rawSyscall(unix.SYS_FINIT_MODULE, 0, 0, 0))
	c.refused("ioctl(FIONREAD)", rawSyscall(unix.SYS_IOCTL, p.pr.Fd(), unix.TIOCINQ, uintptr(unsafe.Pointer(&buf[0]))))
	c.refused("memfd_create", rawSyscall(unix.SYS_MEMFD_CREATE, uintptr(unsafe.Pointer(bytePtr("x"))), 0))
	c.refused("landlock_create_ruleset", rawSyscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 0))
	// Files: no device nodes, fifos, links, new files or names.
	c.refused("mknodat(fifo)", unix.Mknodat(unix.AT_FDCWD, filepath.Join(p.dir, "fifo"), unix.S_IFIFO|0o600, 0))
	c.refused("mknodat(char device)", unix.Mknodat(unix.AT_FDCWD, filepath.Join(p.dir, "null"), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))))
	_, err = unix.Open(filepath.Join(p.dir, "new"), unix.O_WRONLY|unix.O_CREAT, 0o600)
	c.refused("openat(O_CREAT)", err)
	_, err = unix.Open(p.dir, unix.O_TMPFILE|unix.O_RDWR, 0o600)
	c.refused("openat(O_TMPFILE)", err)
	c.refused("mkdirat", unix.Mkdir(filepath.Join(p.dir, "d"), 0o755))
	c.refused("symlinkat", unix.Symlink("/etc", filepath.Join(p.dir, "l")))
	c.refused("linkat", unix.Link(p.file, filepath.Join(p.dir, "h")))
	c.refused("renameat", unix.Rename(p.file, filepath.Join(p.dir, "r")))
	c.refused("fchmodat", unix.Chmod(p.file, 0o4755))
	c.refused("fchownat", unix.Chown(p.file, 0, 0))
	c.refused("truncate", unix.Truncate(p.file, 0))
	// Sockets of families no profile needs.
	for _, s := range []struct {
		what           string
		dom, typ, prot int
	}{
		{"AF_PACKET raw", unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL))},
		{"AF_INET raw", unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW},
		{"AF_INET ICMP (ping)", unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP},
		{"AF_INET6 raw", unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_RAW},
		{"AF_NETLINK", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE},
		{"AF_VSOCK", unix.AF_VSOCK, unix.SOCK_STREAM, 0},
		{"AF_ALG", unix.AF_ALG, unix.SOCK_SEQPACKET, 0},
		{"AF_UNIX datagram", unix.AF_UNIX, unix.SOCK_DGRAM, 0},
		{"AF_UNIX seqpacket", unix.AF_UNIX, unix.SOCK_SEQPACKET, 0},
	} {
		_, err := unix.Socket(s.dom, s.typ, s.prot)
		c.refused("socket "+s.what, err)
	}
	c.refused("bind", unix.Bind(p.sock, &unix.SockaddrInet4{Port: 0}))
	c.refused("listen", unix.Listen(p.sock, 1))
}

// needs are what every locked-down process still does.
func (c *lockedChild) needs(p *prepared) {
	// New threads, timers and the netpoller.
	var n atomic.Int32
	done := make(chan struct{})
	for range 4 {
		go func() {
			goruntime.LockOSThread() // forces new threads (clone)
			time.Sleep(10 * time.Millisecond)
			n.Add(1)
			done <- struct{}{}
		}()
	}
	for range 4 {
		<-done
	}
	if n.Load() != 4 {
		c.fail("threads")
	}
	// A pipe, through the netpoller.
	go func() { _, _ = p.pw.Write([]byte("ping")) }()
	b := make([]byte, 4)
	_ = p.pr.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := p.pr.Read(b)
	c.works("pipe", err)
	// Signals to itself.
	c.works("kill(self, 0)", unix.Kill(os.Getpid(), 0))
	// Its child: signal and wait.
	c.works("signal a child", p.child.Process.Signal(unix.SIGTERM))
	if err := p.child.Wait(); err == nil || !strings.Contains(err.Error(), "terminated") {
		c.fail("wait for a child: %v", err)
	}
}

// filesNeeded are what the host side and the supervisor still do by path:
// read, and remove the state directory.
func (c *lockedChild) filesNeeded(p *prepared) {
	_, err := os.ReadFile(p.file)
	c.works("read a file", err)
	p.remove()
	if _, err := os.Lstat(p.dir); !errors.Is(err, os.ErrNotExist) {
		c.fail("remove the state directory: %v", err)
	}
}

func capEff(status []byte) string {
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:\t"); ok {
			return v
		}
	}
	return "?"
}

func bytePtr(s string) *byte {
	b, _ := unix.BytePtrFromString(s)
	return b
}

func rawExec(path string) error {
	argv := []*byte{bytePtr(path), nil}
	envv := []*byte{nil}
	return rawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(bytePtr(path))), uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])))
}

// rawClone calls clone(flags) with no new stack. Should a fork be let
// through (the old denylist let forks through) the new process exits at
// once and is reaped.
func rawClone(flags uintptr) error {
	r, _, e := unix.RawSyscall6(unix.SYS_CLONE, flags, 0, 0, 0, 0, 0)
	if e == 0 && r == 0 {
		unix.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
	}
	if e == 0 {
		var ws unix.WaitStatus
		_, _ = unix.Wait4(int(r), &ws, 0, nil)
	}
	return errnoErr(e)
}

// ioUringParams is struct io_uring_params.
type ioUringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  struct {
		head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
		userAddr                                                        uint64
	}
	cqOff struct {
		head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
		userAddr                                                        uint64
	}
}

func ioUringSetup() error {
	var p ioUringParams
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 4, uintptr(unsafe.Pointer(&p)), 0)
	if e == 0 {
		unix.Close(int(fd))
	}
	return errnoErr(e)
}

// ringSocketConnect is the attack the old denylist let through: with
// io_uring, IORING_OP_SOCKET and IORING_OP_CONNECT make and connect a unix
// socket without the socket and connect syscalls. It returns nil if it
// connected to path.
func ringSocketConnect(path string) error {
	const (
		opConnect      = 16
		opSocket       = 45
		offSQES        = 0x10000000
		enterGetEvents = 1
	)
	var p ioUringParams
	rfd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 4, uintptr(unsafe.Pointer(&p)), 0)
	if e != 0 {
		return e
	}
	fd := int(rfd)
	defer unix.Close(fd)
	ringSize := int(max(p.sqOff.array+p.sqEntries*4, p.cqOff.cqes+p.cqEntries*16))
	ring, err := unix.Mmap(fd, 0, ringSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return err
	}
	defer unix.Munmap(ring)
	sqes, err := unix.Mmap(fd, offSQES, int(p.sqEntries)*64, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return err
	}
	defer unix.Munmap(sqes)
	u32 := func(b []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }
	submit := func(fill func(sqe []byte)) (int32, error) {
		tail := atomic.LoadUint32(u32(ring, p.sqOff.tail))
		idx := tail & *u32(ring, p.sqOff.ringMask)
		sqe := sqes[idx*64 : idx*64+64]
		clear(sqe)
		fill(sqe)
		*u32(ring, p.sqOff.array+idx*4) = idx
		atomic.StoreUint32(u32(ring, p.sqOff.tail), tail+1)
		if _, _, e := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(fd), 1, 1, enterGetEvents, 0, 0); e != 0 {
			return 0, e
		}
		head := atomic.LoadUint32(u32(ring, p.cqOff.head))
		cqe := p.cqOff.cqes + (head&*u32(ring, p.cqOff.ringMask))*16
		res := *(*int32)(unsafe.Pointer(&ring[cqe+8]))
		atomic.StoreUint32(u32(ring, p.cqOff.head), head+1)
		return res, nil
	}
	sfd, err := submit(func(sqe []byte) {
		sqe[0] = opSocket
		*(*int32)(unsafe.Pointer(&sqe[4])) = unix.AF_UNIX
		*(*uint64)(unsafe.Pointer(&sqe[8])) = unix.SOCK_STREAM
	})
	if err != nil {
		return err
	}
	if sfd < 0 {
		return syscall.Errno(-sfd)
	}
	defer unix.Close(int(sfd))
	var sa unix.RawSockaddrUnix
	sa.Family = unix.AF_UNIX
	for i := range len(path) {
		sa.Path[i] = int8(path[i])
	}
	res, err := submit(func(sqe []byte) {
		sqe[0] = opConnect
		*(*int32)(unsafe.Pointer(&sqe[4])) = sfd
		*(*uint64)(unsafe.Pointer(&sqe[8])) = uint64(unsafe.Sizeof(sa))
		*(*uint64)(unsafe.Pointer(&sqe[16])) = uint64(uintptr(unsafe.Pointer(&sa)))
	})
	goruntime.KeepAlive(&sa)
	if err != nil {
		return err
	}
	if res < 0 {
		return syscall.Errno(-res)
	}
	return nil
}

// unixTarget is a host unix service the children attack (through
// io_uring, or a plain socket). It reports whether anything connected.
func unixTarget(t *testing.T) (path string, connected func() bool) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "service.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan struct{}, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Close()
			got <- struct{}{}
		}
	}()
	t.Cleanup(func() { l.Close() })
	return path, func() bool {
		select {
		case <-got:
			return true
		case <-time.After(200 * time.Millisecond):
			return false
		}
	}
}

// TestRingSocketConnectWorksUnconfined checks the attack itself: without a
// lockdown, io_uring reaches the unix service. (If this fails, the
// refusals below prove nothing about io_uring.)
func TestRingSocketConnectWorksUnconfined(t *testing.T) {
	sock, connected := unixTarget(t)
	if err := ringSocketConnect(sock); err != nil {
		t.Skipf("io_uring socket+connect does not work here even unconfined: %v", err)
	}
	if !connected() {
		t.Fatal("io_uring connect returned success but the service saw no connection")
	}
}

// TestLockdownHost: the host side without NAT (Lockdown) refuses every
// attack, io_uring included (the service sees no connection), and every
// socket; what it needs still works.
func TestLockdownHost(t *testing.T) {
	sock, connected := unixTarget(t)
	runLockedChild(t, "host", "GVX_LOCKDOWN_UNIX_TARGET="+sock)
	if connected() {
		t.Fatal("the locked-down host side reached the unix service")
	}
}

func hostChild(c *lockedChild) {
	p := prepareChild(c)
	// A published port: the listener and a client's connection come
	// from before the lockdown, as a guest's client's would from outside.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	c.must("listen", err)
	client, err := net.Dial("tcp", l.Addr().String())
	c.must("dial", err)
	c.must("Lockdown", Lockdown(p.dir, p.child.Process.Pid))
	c.attacks(p)
	c.needs(p)
	c.filesNeeded(p)
	// No socket at all without NAT; accept on its listeners works.
	for _, s := range [][2]int{{unix.AF_INET, unix.SOCK_STREAM}, {unix.AF_INET6, unix.SOCK_DGRAM}, {unix.AF_UNIX, unix.SOCK_STREAM}} {
		_, err := unix.Socket(s[0], s[1], 0)
		c.refused(fmt.Sprintf("socket(%d, %d)", s[0], s[1]), err)
	}
	_, err = unix.Open(p.file, unix.O_WRONLY, 0)
	c.refused("openat(O_WRONLY)", err)
	_, err = unix.Open(p.file, unix.O_RDWR, 0)
	c.refused("openat(O_RDWR)", err)
	conn, err := l.Accept()
	c.works("accept on a listener", err)
	if err == nil {
		go func() { _, _ = client.Write([]byte("hi")) }()
		b := make([]byte, 2)
		_, err = conn.Read(b)
		c.works("read an accepted connection", err)
		c.works("shut it down", conn.(*net.TCPConn).CloseWrite())
	}
	// A TCP client goes to the guest as one end of a socketpair, passed
	// with SCM_RIGHTS (runtime/net).
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	c.works("socketpair", err)
	if err == nil {
		c.works("sendmsg with SCM_RIGHTS", unix.Sendmsg(fds[0], []byte{1}, unix.UnixRights(fds[1]), nil, 0))
	}
}

// TestLockdownHostNAT: with NAT the host side may open AF_INET and
// AF_INET6 stream and datagram sockets and connect them, nothing else.
func TestLockdownHostNAT(t *testing.T) {
	sock, connected := unixTarget(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := make(chan string, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		b := make([]byte, 5)
		n, _ := c.Read(b)
		got <- string(b[:n])
		c.Close()
	}()
	runLockedChild(t, "host-nat", "GVX_LOCKDOWN_UNIX_TARGET="+sock, "GVX_LOCKDOWN_TCP_TARGET="+l.Addr().String())
	if connected() {
		t.Fatal("the locked-down host side reached the unix service")
	}
	select {
	case s := <-got:
		if s != "hello" {
			t.Fatalf("the NAT dial carried %q", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the NAT dial did not reach the listener")
	}
}

func hostNATChild(c *lockedChild) {
	p := prepareChild(c)
	c.must("LockdownNAT", LockdownNAT(p.dir, p.child.Process.Pid))
	c.attacks(p)
	c.needs(p)
	c.filesNeeded(p)
	conn, err := net.Dial("tcp", os.Getenv("GVX_LOCKDOWN_TCP_TARGET"))
	c.works("dial TCP", err)
	if err == nil {
		_, err = conn.Write([]byte("hello"))
		c.works("write TCP", err)
		conn.Close()
	}
	u, err := net.Dial("udp", "127.0.0.1:9")
	c.works("dial UDP", err)
	if err == nil {
		u.Close()
	}
	_, err = unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	c.works("socket(AF_INET6, SOCK_STREAM|flags)", err)
	_, err = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	c.refused("socket(AF_UNIX, SOCK_STREAM)", err)
	_, err = net.Dial("unix", os.Getenv("GVX_LOCKDOWN_UNIX_TARGET"))
	c.refused("dial unix", err)
}

// TestLockdownSupervisor: the supervisor's profile writes only files it
// opened before (cgroup.procs), signals only init (its child), reaches by
// path only the state directory, and makes no socket at all (publishing is
// the host side's).
func TestLockdownSupervisor(t *testing.T) {
	sock, connected := unixTarget(t)
	runLockedChild(t, "supervisor", "GVX_LOCKDOWN_UNIX_TARGET="+sock)
	if connected() {
		t.Fatal("the locked-down supervisor reached the unix service through io_uring")
	}
}

func supervisorChild(c *lockedChild) {
	p := prepareChild(c)
	relay, err := net.Listen("unix", filepath.Join(p.dir, "relay.sock"))
	c.must("listen", err)
	f, err := os.OpenFile(p.file, os.O_WRONLY, 0)
	c.must("open", err)
	outside, err := os.MkdirTemp("", "lockdown-outside-")
	c.must("mkdir", err)
	c.must("file", os.WriteFile(filepath.Join(outside, "f"), []byte("x"), 0o644))
	c.must("lockdownAs(supervisor)", lockdownAs(supervisorProfile(p.child.Process.Pid, p.dir, nil, nil)))
	c.attacks(p)
	_, err = unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	c.refused("socketpair", err)
	_, err = unix.Open(p.file, unix.O_WRONLY, 0)
	c.refused("openat(O_WRONLY)", err)
	_, err = f.WriteString("1")
	c.works("write a file opened before (cgroup.procs)", err)
	_, err = net.Dial("unix", relay.Addr().String())
	c.refused("dial a unix socket", err)
	_, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	c.refused("socket(AF_INET)", err)
	relay.Close()
	c.landlocked(p, filepath.Join(outside, "f"))
	c.needs(p)
	c.filesNeeded(p)
}

// landlocked checks that a file outside the process's Landlock rules can
// be neither read nor removed, where the kernel has Landlock.
func (c *lockedChild) landlocked(p *prepared, outside string) {
	if p.abi == 0 {
		fmt.Println("no Landlock here: access by path is not confined")
		return
	}
	for what, err := range map[string]error{
		"read a file outside the state directory":   func() error { _, err := os.ReadFile(outside); return err }(),
		"remove a file outside the state directory": unix.Unlink(outside),
		"list /":           func() error { _, err := os.ReadDir("/"); return err }(),
		"read /etc/passwd": func() error { _, err := os.ReadFile("/etc/passwd"); return err }(),
	} {
		if !errors.Is(err, unix.EACCES) {
			c.fail("%s: got %v, want EACCES from Landlock", what, err)
		}
	}
}

// TestLockdownSupervisorCgroups: as root with a host cgroup, the
// supervisor keeps CAP_DAC_OVERRIDE (a v1 hierarchy's root is mode 0555)
// and Landlock holds it to removing directories beneath the cgroups'
// parents: it can remove its cgroup, and still read nothing else (not
// even a root-only file), nor remove anything else.
func TestLockdownSupervisorCgroups(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: CAP_DAC_OVERRIDE is what is tested")
	}
	if lockdown.LandlockABI() == 0 {
		t.Skip("no Landlock here: the supervisor keeps no capability, its cgroups stay")
	}
	runLockedChild(t, "supervisor-cgroups")
}

func supervisorCgroupsChild(c *lockedChild) {
	p := prepareChild(c)
	p.capEff = fmt.Sprintf("%016x", 1<<unix.CAP_DAC_OVERRIDE)
	hier, err := os.MkdirTemp("", "lockdown-cgroupfs-")
	c.must("mkdir", err)
	cg := filepath.Join(hier, "gvx-test")
	c.must("mkdir", os.Mkdir(cg, 0o755))
	other := filepath.Join(hier, "other")
	c.must("file", os.WriteFile(other, nil, 0o644))
	secret := filepath.Join(p.dir, "..", filepath.Base(p.dir)+"-secret")
	c.must("secret", os.WriteFile(secret, []byte("x"), 0))
	c.must("chmod", os.Chmod(hier, 0o555)) // as a v1 hierarchy's root
	c.must("lockdownAs(supervisor)", lockdownAs(supervisorProfile(p.child.Process.Pid, p.dir, []string{cg}, nil)))
	c.attacks(p)
	c.works("remove its cgroup from a 0555 parent", unix.Rmdir(cg))
	c.refused("remove another file there", errPermOrAcces(unix.Unlink(other)))
	_, err = os.ReadFile(secret)
	c.refused("read a mode 0 file outside the state directory", errPermOrAcces(err))
	c.needs(p)
	c.filesNeeded(p)
}

// errPermOrAcces maps Landlock's EACCES to EPERM for refused.
func errPermOrAcces(err error) error {
	if errors.Is(err, unix.EACCES) {
		return unix.EPERM
	}
	return err
}

// TestLockdownInit: init's profile opens no socket of any kind and
// reaches no file by path.
func TestLockdownInit(t *testing.T) {
	sock, connected := unixTarget(t)
	runLockedChild(t, "init", "GVX_LOCKDOWN_UNIX_TARGET="+sock)
	if connected() {
		t.Fatal("the locked-down init reached the unix service")
	}
}

func initChild(c *lockedChild) {
	p := prepareChild(c)
	c.must("lockdownAs(init)", lockdownAs(initProfile(p.child.Process.Pid)))
	c.attacks(p)
	_, perr := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	c.refused("socketpair", perr)
	for _, s := range [][2]int{{unix.AF_INET, unix.SOCK_STREAM}, {unix.AF_UNIX, unix.SOCK_STREAM}} {
		_, err := unix.Socket(s[0], s[1], 0)
		c.refused(fmt.Sprintf("socket(%d, %d)", s[0], s[1]), err)
	}
	_, err := net.Dial("unix", os.Getenv("GVX_LOCKDOWN_UNIX_TARGET"))
	c.refused("dial unix", err)
	// Nothing by path at all (Landlock, no rule).
	c.landlocked(p, p.file)
	c.needs(p)
}

// TestLockdownOtherABIKills: a syscall through another ABI (x32 on amd64)
// kills the process instead of reaching a syscall table the filter does
// not describe.
func TestLockdownOtherABIKills(t *testing.T) {
	if goruntime.GOARCH != "amd64" {
		t.Skip("x32 is an amd64 ABI")
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), lockdownChildEnv+"=x32")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != unix.SIGSYS {
		t.Fatalf("child ended with %v, want killed by SIGSYS\n%s", ee, out)
	}
}

func x32Child(c *lockedChild) {
	c.must("Lockdown", Lockdown(""))
	// x32 getpid: 39 | __X32_SYSCALL_BIT.
	_, _, e := unix.RawSyscall(x32SyscallBit|unix.SYS_GETPID, 0, 0, 0)
	c.fail("x32 getpid returned (errno %v) instead of killing the process", e)
}
