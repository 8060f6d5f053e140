package volume

import (
	"fmt"
	"maps"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/abi/linux"
	"gvisor.dev/gvisor/pkg/context"
	"gvisor.dev/gvisor/pkg/lisafs"
	"gvisor.dev/gvisor/pkg/log"
)

// pathSyscalls are the syscalls that name a host path, or reach the host
// some other way (a socket, an exec): the volume server needs none of them
// once it holds the volume file's FD.
var pathSyscalls = []uintptr{
	unix.SYS_OPEN, unix.SYS_OPENAT, unix.SYS_OPENAT2, unix.SYS_CREAT, unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_NAME_TO_HANDLE_AT,
	unix.SYS_STAT, unix.SYS_LSTAT, unix.SYS_NEWFSTATAT, unix.SYS_STATX, unix.SYS_ACCESS, unix.SYS_FACCESSAT, unix.SYS_FACCESSAT2,
	unix.SYS_READLINK, unix.SYS_READLINKAT, unix.SYS_MKDIR, unix.SYS_MKDIRAT, unix.SYS_MKNOD, unix.SYS_MKNODAT,
	unix.SYS_UNLINK, unix.SYS_UNLINKAT, unix.SYS_RMDIR, unix.SYS_RENAME, unix.SYS_RENAMEAT, unix.SYS_RENAMEAT2,
	unix.SYS_LINK, unix.SYS_LINKAT, unix.SYS_SYMLINK, unix.SYS_SYMLINKAT, unix.SYS_CHMOD, unix.SYS_FCHMODAT,
	unix.SYS_CHOWN, unix.SYS_LCHOWN, unix.SYS_FCHOWNAT, unix.SYS_TRUNCATE, unix.SYS_UTIMES, unix.SYS_UTIMENSAT, unix.SYS_FUTIMESAT,
	unix.SYS_SETXATTR, unix.SYS_LSETXATTR, unix.SYS_GETXATTR, unix.SYS_LGETXATTR, unix.SYS_LISTXATTR, unix.SYS_LLISTXATTR,
	unix.SYS_REMOVEXATTR, unix.SYS_LREMOVEXATTR, unix.SYS_CHDIR, unix.SYS_CHROOT, unix.SYS_MOUNT, unix.SYS_UMOUNT2,
	unix.SYS_EXECVE, unix.SYS_EXECVEAT, unix.SYS_SOCKET, unix.SYS_CONNECT, unix.SYS_BIND,
}

// killOnPathSyscalls installs a seccomp filter on every thread of the
// process that kills it at the first of pathSyscalls.
func killOnPathSyscalls() error {
	const (
		ld  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ret = unix.BPF_RET | unix.BPF_K
	)
	n := len(pathSyscalls)
	prog := []unix.SockFilter{
		{Code: ld, K: 4}, // seccomp_data.arch
		{Code: jeq, Jt: 1, K: unix.AUDIT_ARCH_X86_64},
		{Code: ret, K: unix.SECCOMP_RET_KILL_PROCESS},
		{Code: ld, K: 0}, // seccomp_data.nr
	}
	for i, nr := range pathSyscalls {
		prog = append(prog, unix.SockFilter{Code: jeq, Jt: uint8(n - i), K: uint32(nr)})
	}
	prog = append(prog,
		unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW},
		unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_KILL_PROCESS})
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return e
	}
	return nil
}

const noPathEnv = "GVX_VOLUME_NOPATH_CHILD"

// TestHostileServerOpensNoPath: a Sentry cannot make the volume server
// reach anything outside the volume. A child process serves a volume, then
// installs a seccomp filter that kills it at the first syscall naming a
// host path or making a socket (open, openat, stat, readlink, mkdir, …,
// socket, connect, execve), and plays the escapes a guest would try (a
// symlink to ../../../../etc/passwd walked through and read, "..", "/" and
// NUL in names, Connect on it), every FuzzServe seed and 50 random
// programs on the one volume, then unmounts it. It must live to say so, and the volume passes
// ext4lite's checker and e2fsck -fn. Also: the seccomp rules the gofer
// extension adds stay the nine syscalls on the volume file's FD.
func TestHostileServerOpensNoPath(t *testing.T) {
	if path := os.Getenv(noPathEnv); path != "" {
		noPathChild(t, path)
		return
	}
	rules := (&Extension{}).SeccompRules()
	want := []uintptr{unix.SYS_PREAD64, unix.SYS_PWRITE64, unix.SYS_FSYNC, unix.SYS_FDATASYNC, unix.SYS_FSTAT, unix.SYS_FTRUNCATE, unix.SYS_FALLOCATE, unix.SYS_LSEEK, unix.SYS_CLOSE}
	for _, nr := range want {
		if !rules.Has(nr) {
			t.Errorf("SeccompRules lacks syscall %d", nr)
		}
	}
	if rules.Size() != len(want) {
		t.Errorf("SeccompRules allows %d syscalls, want exactly %d: %v", rules.Size(), len(want), rules)
	}

	child := func(env string) (*exec.Cmd, []byte, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHostileServerOpensNoPath$", "-test.v")
		cmd.Env = append(os.Environ(), noPathEnv+"="+env)
		out, err := cmd.CombinedOutput()
		return cmd, out, err
	}
	// The filter works: a child that opens a file once it is installed
	// dies of SIGSYS.
	cmd, out, err := child("canary:" + filepath.Join(t.TempDir(), "canary.ext4"))
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); err == nil || !ok || !ws.Signaled() || ws.Signal() != syscall.SIGSYS {
		t.Fatalf("a child that opens /etc/passwd under the filter: %v, want SIGSYS\n%s", err, tail(out, 2000))
	}
	path := filepath.Join(t.TempDir(), "vol.ext4")
	_, out, err = child(path)
	if err != nil || !strings.Contains(string(out), "served with no path syscall") {
		t.Fatalf("the server under a filter that kills at a path syscall: %v (SIGSYS: it made one)\n%s", err, tail(out, 4000))
	}
	t.Logf("%s", tail(out, 300))
	checkVolume(t, path, "every FuzzServe seed, then the escapes")
	e2fsckClean(t, path)
}

// noPathChild is TestHostileServerOpensNoPath's child: it exits without
// returning (the test framework's cleanup removes files by path).
func noPathChild(t *testing.T, path string) {
	path, canary := strings.CutPrefix(path, "canary:")
	s := serveAt(t, path, 32<<20, Mount{Target: "/vol", MaxOpen: hostileMaxOpen})
	ctx := context.Background()
	// What touches a path once, lazily, before the filter: the local time
	// zone (log timestamps), lisafs's log.
	_ = time.Now().Local().String()
	log.Infof("volume: no-path child starting")
	if err := killOnPathSyscalls(); err != nil {
		fmt.Printf("seccomp: %v\n", err)
		os.Exit(2)
	}
	if canary {
		f, err := os.Open("/etc/passwd")
		fmt.Printf("open /etc/passwd under the filter: %v, %v\n", f, err)
		os.Exit(0)
	}
	// The escapes a guest would try.
	esc, err := s.root.SymlinkAt(ctx, "esc", "../../../../etc/passwd", 0, 0)
	must(err)
	escFD := s.client.NewFD(esc.ControlFD)
	target, err := escFD.ReadLinkAt(ctx)
	must(err)
	if target != "../../../../etc/passwd" {
		fmt.Printf("readlink: %q\n", target)
		os.Exit(3)
	}
	status, inodes, err := s.root.WalkMultiple(ctx, []string{"esc", "passwd"})
	fmt.Printf("walk esc/passwd: status %d, %d inodes, %v\n", status, len(inodes), err)
	for _, names := range [][]string{{".."}, {"..", "..", "etc"}, {"/etc/passwd"}, {"esc\x00"}} {
		_, _, err := s.root.WalkMultiple(ctx, names)
		_, serr := s.root.WalkStat(ctx, names)
		fmt.Printf("walk %q: %v; walkstat: %v\n", names, err, serr)
	}
	if _, _, err := escFD.OpenAt(ctx, unix.O_RDONLY); err == nil {
		fmt.Println("a symlink was opened")
		os.Exit(3)
	}
	fd, err := escFD.Connect(ctx, linux.SOCK_STREAM, 0, 0)
	fmt.Printf("connect: %d, %v\n", fd, err)
	h := &hostile{tb: t, s: s, ctx: ctx, fds: []lisafs.FDID{s.root.ID()}}
	// Every seed, the one that closes the root last, then 50 random
	// programs.
	names := slices.Sorted(maps.Keys(hostileSeeds))
	names = append(slices.DeleteFunc(names, func(n string) bool { return n == "bad-fds" }), "bad-fds")
	for _, name := range names {
		h.prog = hostileSeeds[name]
		h.run()
		fmt.Printf("seed %s: %d ops\n", name, len(h.trace))
	}
	r := rand.New(rand.NewSource(3))
	for i := 0; i < 50; i++ {
		h.prog = make([]byte, 100+r.Intn(400))
		r.Read(h.prog)
		h.run()
	}
	s.close()
	fmt.Printf("%d ops served with no path syscall\n", len(h.trace))
	os.Exit(0)
}

func must(err error) {
	if err != nil {
		fmt.Println(err)
		os.Exit(3)
	}
}

// tail is the last n bytes of b.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
