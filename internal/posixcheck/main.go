// Command posixcheck is gvx's POSIX conformance suite for a filesystem: run
// as root with one empty directory, it exercises there what a POSIX
// filesystem promises and Docker (overlay2's whiteouts and xattrs), pytest
// (open-unlinked capture files) and git (renames, O_EXCL lock files, mtimes)
// rely on, and prints one line per step:
//
//	check.step value
//
// where value is "ok", an errno name ("ENOENT") or a value that does not
// depend on the filesystem instance (sizes, modes, which times changed,
// never inode numbers or free-space figures). Two runs, one on a kernel
// ext4 mount and one on an ext4lite volume inside an episode, are diffed
// line by line (pkg/gvx's TestPOSIXConformance); docs/ext4lite.md lists the
// differences that remain and why.
//
// The checks were chosen after reading pjdfstest's and xfstests' generic
// cases; the code is the project's own. Static (CGO_ENABLED=0), so the same
// binary runs on the host and in the guest.
//
//	posixcheck DIR          run every check in DIR (made if missing)
//	posixcheck -dump DIR    list what DIR holds: one line per entry (type,
//	                        mode, owner, size, links, device, mtime, xattrs,
//	                        link target or a hash of the data)
//	posixcheck -child ...   internal: a step run as another user or process
//
// -dump after a run, once in the episode and once on the host's kernel
// mount of the same volume afterwards, shows whether what the guest saw is
// what the volume holds (gVisor's caches would hide a server that lost a
// mode, a time or data).
package main

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// out collects the lines of one check.
type out struct{ check string }

func (o *out) p(step string, v any) {
	fmt.Printf("%s.%s %v\n", o.check, step, v)
}

// e prints err as ok or its errno name.
func (o *out) e(step string, err error) { o.p(step, en(err)) }

func en(err error) string {
	if err == nil {
		return "ok"
	}
	var no syscall.Errno
	if pe, ok := err.(*os.PathError); ok {
		err = pe.Err
	}
	if le, ok := err.(*os.LinkError); ok {
		err = le.Err
	}
	if se, ok := err.(*os.SyscallError); ok {
		err = se.Err
	}
	if e, ok := err.(syscall.Errno); ok {
		no = e
		if n := unix.ErrnoName(no); n != "" {
			return n
		}
	}
	return "error(" + err.Error() + ")"
}

func lst(p string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Lstat(p, &st)
	return st, err
}

func mustLst(p string) unix.Stat_t {
	st, _ := lst(p)
	return st
}

func fst(fd int) unix.Stat_t {
	var st unix.Stat_t
	_ = unix.Fstat(fd, &st)
	return st
}

func mode(st unix.Stat_t) string { return fmt.Sprintf("%07o", st.Mode) }

func write(p, s string) error { return os.WriteFile(p, []byte(s), 0o644) }

func read(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return en(err)
	}
	return strconv.Quote(string(b))
}

func openfd(p string, flags int, perm uint32) int {
	fd, err := unix.Open(p, flags|unix.O_CLOEXEC, perm)
	if err != nil {
		return -1
	}
	return fd
}

func pread(fd int, n int, off int64) string {
	b := make([]byte, n)
	m, err := unix.Pread(fd, b, off)
	if err != nil {
		return en(err)
	}
	return strconv.Quote(string(b[:m]))
}

// tick lets the clock move past a timestamp's granularity (the kernel's
// coarse clock ticks every few milliseconds).
func tick() { time.Sleep(25 * time.Millisecond) }

type tset struct{ a, m, c unix.Timespec }

func times(st unix.Stat_t) tset { return tset{st.Atim, st.Mtim, st.Ctim} }

// changed says which of mtime and ctime moved between two stats: "mc",
// "m", "c" or "-"; "<" marks a time that went backwards.
func changed(a, b unix.Stat_t) string {
	s := ""
	cmp := func(x, y unix.Timespec, l string) {
		switch {
		case y.Nano() > x.Nano():
			s += l
		case y.Nano() < x.Nano():
			s += "<" + l
		}
	}
	cmp(a.Mtim, b.Mtim, "m")
	cmp(a.Ctim, b.Ctim, "c")
	if s == "" {
		return "-"
	}
	return s
}

type check struct {
	name string
	fn   func(o *out, d string)
}

var checks = []check{
	{"unlinked", checkUnlinked},
	{"unlinked_mmap", checkUnlinkedMmap},
	{"rename_file", checkRenameFile},
	{"rename_dir", checkRenameDir},
	{"rename_flags", checkRenameFlags},
	{"rename_self", checkRenameSelf},
	{"rename_crossdir", checkRenameCrossDir},
	{"link", checkLink},
	{"tmpfile", checkTmpfile},
	{"symlink", checkSymlink},
	{"chmod", checkChmod},
	{"create_mode", checkCreateMode},
	{"setgid_dir", checkSetgidDir},
	{"chown", checkChown},
	{"suid_write", checkSuidWrite},
	{"utimens", checkUtimens},
	{"truncate", checkTruncate},
	{"dirs", checkDirs},
	{"open_flags", checkOpenFlags},
	{"sparse", checkSparse},
	{"fallocate", checkFallocate},
	{"large", checkLarge},
	{"xattr", checkXattr},
	{"mknod", checkMknod},
	{"readdir_mutate", checkReaddirMutate},
	{"statfs", checkStatfs},
	{"fsync", checkFsync},
	{"flock", checkFlock},
	{"fcntl_lock", checkFcntlLock},
	{"names", checkNames},
	{"times", checkTimes},
	{"mmap", checkMmap},
	{"data", checkData},
	{"bigdir", checkBigdir},
	{"append_two", checkAppendTwo},
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-child" {
		os.Exit(child(os.Args[2:]))
	}
	if len(os.Args) == 3 && os.Args[1] == "-dump" {
		os.Exit(dump(os.Args[2]))
	}
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: posixcheck DIR (run as root; DIR is made if missing and must be empty)")
		os.Exit(2)
	}
	if os.Getuid() != 0 {
		fmt.Fprintln(os.Stderr, "posixcheck: run it as root (it checks chown, trusted.* xattrs and devices)")
		os.Exit(2)
	}
	unix.Umask(0o022)
	dir := os.Args[1]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "posixcheck:", err)
		os.Exit(1)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		fmt.Fprintf(os.Stderr, "posixcheck: %s is not empty: give it an empty directory\n", dir)
		os.Exit(2)
	}
	for _, c := range checks {
		d := filepath.Join(dir, c.name)
		if err := os.Mkdir(d, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "posixcheck:", err)
			os.Exit(1)
		}
		c.fn(&out{check: c.name}, d)
	}
	fmt.Println("end ok")
}

// child runs one step in a process of its own: as nobody, or as a second
// process for fcntl's per-process locks.
func child(args []string) int {
	switch args[0] {
	case "write": // write one byte at the end of args[1]
		f, err := os.OpenFile(args[1], os.O_WRONLY|os.O_APPEND, 0)
		if err == nil {
			_, err = f.Write([]byte("x"))
			f.Close()
		}
		fmt.Print(en(err))
	case "truncate":
		fmt.Print(en(unix.Truncate(args[1], 1)))
	case "append": // 2,000 records of 16 bytes with O_APPEND, one write each
		f, err := os.OpenFile(args[1], os.O_WRONLY|os.O_APPEND, 0)
		for i := 0; err == nil && i < 2000; i++ {
			_, err = fmt.Fprintf(f, "%s%014d\n", args[2], i)
		}
		if f != nil {
			f.Close()
		}
		fmt.Print(en(err))
	case "getlk": // F_SETLK and F_GETLK on bytes 0..9 of args[1]
		fd := openfd(args[1], unix.O_RDWR, 0)
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 10}
		e1 := unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &lk)
		lk = unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 10}
		e2 := unix.FcntlFlock(uintptr(fd), unix.F_GETLK, &lk)
		who := "other"
		if int(lk.Pid) == os.Getppid() {
			who = "parent"
		}
		fmt.Printf("setlk=%s getlk=%s type=%d start=%d len=%d pid=%s", en(e1), en(e2), lk.Type, lk.Start, lk.Len, who)
		lk = unix.Flock_t{Type: unix.F_RDLCK, Whence: 0, Start: 10, Len: 10}
		fmt.Printf(" setlk_free=%s", en(unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &lk)))
	case "op": // a single call from childOps
		fn, ok := childOps[args[1]]
		if !ok {
			return 2
		}
		fmt.Print(fn(args[2:]))
	default:
		return 2
	}
	return 0
}

// runChild runs posixcheck -child args, as nobody when asNobody.
func runChild(asNobody bool, args ...string) string {
	self, err := os.Executable()
	if err != nil {
		return en(err)
	}
	cmd := exec.Command(self, append([]string{"-child"}, args...)...)
	if asNobody {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	b, err := cmd.Output()
	if err != nil {
		return "child:" + en(err)
	}
	return string(b)
}

func checkUnlinked(o *out, d string) {
	p := filepath.Join(d, "capture")
	fd := openfd(p, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, 0o600)
	_, err := unix.Write(fd, []byte("first output, to be dropped"))
	o.e("write", err)
	o.e("unlink", unix.Unlink(p))
	_, err = lst(p)
	o.e("lstat_gone", err)
	o.p("fstat_nlink", fst(fd).Nlink)
	o.p("fstat_size", fst(fd).Size)
	o.p("read", pread(fd, 5, 0))
	o.e("ftruncate0", unix.Ftruncate(fd, 0))
	o.p("size_after_truncate", fst(fd).Size)
	_, err = unix.Pwrite(fd, []byte("kept"), 0)
	o.e("pwrite", err)
	o.p("read_back", pread(fd, 100, 0))
	o.e("ftruncate_grow", unix.Ftruncate(fd, 8192))
	o.p("size_grown", fst(fd).Size)
	o.p("read_hole", pread(fd, 4, 4096))
	o.e("fallocate", unix.Fallocate(fd, 0, 0, 16384))
	o.p("size_fallocated", fst(fd).Size)
	o.e("fchmod", unix.Fchmod(fd, 0o640))
	o.p("mode", mode(fst(fd)))
	o.e("fchown", unix.Fchown(fd, 42, 43))
	o.p("owner", fmt.Sprintf("%d:%d", fst(fd).Uid, fst(fd).Gid))
	o.e("futimens", unix.UtimesNanoAt(fd, "", []unix.Timespec{{Sec: 7, Nsec: 8}, {Sec: 9, Nsec: 10}}, unix.AT_EMPTY_PATH))
	o.p("mtime", fmt.Sprintf("%d.%09d", fst(fd).Mtim.Sec, fst(fd).Mtim.Nsec))
	o.e("fsync", unix.Fsync(fd))
	o.e("fsetxattr", unix.Fsetxattr(fd, "user.k", []byte("v"), 0))
	b := make([]byte, 8)
	n, err := unix.Fgetxattr(fd, "user.k", b)
	o.p("fgetxattr", fmt.Sprintf("%s:%q", en(err), b[:max(n, 0)]))
	// open("/proc/self/fd/N") opens the unlinked inode again.
	fd2, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd), unix.O_RDWR, 0)
	o.e("reopen", err)
	if err == nil {
		o.p("reopen_read", pread(fd2, 4, 0))
		_, err = unix.Pwrite(fd2, []byte("KE"), 0)
		o.e("reopen_write", err)
		unix.Close(fd2)
	}
	o.p("read_after_reopen", pread(fd, 4, 0))
	// linkat(AT_EMPTY_PATH) of a file unlinked (not O_TMPFILE) is ENOENT.
	o.e("linkat_empty_path", unix.Linkat(fd, "", unix.AT_FDCWD, filepath.Join(d, "back"), unix.AT_EMPTY_PATH))
	o.e("close", unix.Close(fd))
	ents, _ := os.ReadDir(d)
	o.p("dir_entries", len(ents))
}

func checkUnlinkedMmap(o *out, d string) {
	p := filepath.Join(d, "m")
	fd := openfd(p, unix.O_RDWR|unix.O_CREAT, 0o600)
	unix.Ftruncate(fd, 8192)
	unix.Unlink(p)
	m, err := unix.Mmap(fd, 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	o.e("mmap", err)
	if err != nil {
		unix.Close(fd)
		return
	}
	copy(m[4096:], "through the map")
	o.e("msync", unix.Msync(m, unix.MS_SYNC))
	o.p("pread_sees_map", pread(fd, 15, 4096))
	unix.Pwrite(fd, []byte("by pwrite"), 100)
	o.p("map_sees_pwrite", strconv.Quote(string(m[100:109])))
	unix.Close(fd)
	copy(m[200:], "after close")
	o.p("map_after_close", strconv.Quote(string(m[200:211])))
	o.e("munmap", unix.Munmap(m))
}

func checkRenameFile(o *out, d string) {
	a, b := filepath.Join(d, "a"), filepath.Join(d, "b")
	write(a, "A")
	write(b, "B")
	fdb := openfd(b, unix.O_RDONLY, 0)
	before := mustLst(a)
	tick()
	o.e("over_file", unix.Rename(a, b))
	o.p("content", read(b))
	_, err := lst(a)
	o.e("old_gone", err)
	o.p("replaced_nlink", fst(fdb).Nlink)
	o.p("replaced_read", pread(fdb, 1, 0))
	o.p("renamed_times", changed(before, mustLst(b)))
	unix.Close(fdb)
	// Two names of one inode: rename does nothing, both stay.
	c := filepath.Join(d, "c")
	unix.Link(b, c)
	o.e("same_inode", unix.Rename(b, c))
	_, eb := lst(b)
	_, ec := lst(c)
	o.p("same_inode_names", en(eb)+","+en(ec))
	o.p("same_inode_nlink", mustLst(c).Nlink)
	o.e("to_self", unix.Rename(c, c))
	os.Mkdir(filepath.Join(d, "dir"), 0o755)
	o.e("file_over_dir", unix.Rename(c, filepath.Join(d, "dir")))
	o.e("trailing_slash_file", unix.Rename(c, filepath.Join(d, "x")+"/"))
	o.e("missing", unix.Rename(filepath.Join(d, "nope"), filepath.Join(d, "y")))
	o.e("into_missing_dir", unix.Rename(c, filepath.Join(d, "nodir", "y")))
	o.e("into_file", unix.Rename(c, filepath.Join(b, "y")))
	// (gVisor's cached link count of c after same_inode is 2 or 1,
	// depending on whether it looked again: -dump would differ by chance.)
	unix.Unlink(c)
}

func checkRenameDir(o *out, d string) {
	mk := func(n string) string { p := filepath.Join(d, n); os.Mkdir(p, 0o755); return p }
	a, b := mk("a"), mk("b")
	write(filepath.Join(a, "f"), "f")
	o.p("parent_nlink", mustLst(d).Nlink)
	o.e("over_empty_dir", unix.Rename(a, b))
	o.p("content", read(filepath.Join(b, "f")))
	o.p("parent_nlink_after", mustLst(d).Nlink)
	c := mk("c")
	write(filepath.Join(c, "g"), "g")
	err := unix.Rename(b, c)
	o.e("over_nonempty_dir", err)
	write(filepath.Join(d, "file"), "x")
	o.e("dir_over_file", unix.Rename(b, filepath.Join(d, "file")))
	o.e("trailing_slash_dir", unix.Rename(b, filepath.Join(d, "b2")+"/"))
	b = filepath.Join(d, "b2") // filepath.Join would clean the dots away
	o.e("dot", unix.Rename(b+"/.", filepath.Join(d, "z")))
	o.e("dotdot", unix.Rename(b+"/..", filepath.Join(d, "z")))
	o.e("dotdot_target", unix.Rename(filepath.Join(d, "file"), b+"/.."))
	o.e("rmdir_dot", unix.Rmdir(b+"/."))
}

func checkRenameFlags(o *out, d string) {
	a, b := filepath.Join(d, "a"), filepath.Join(d, "b")
	write(a, "A")
	write(b, "B")
	o.e("noreplace_existing", unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_NOREPLACE))
	o.e("noreplace_free", unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, filepath.Join(d, "n"), unix.RENAME_NOREPLACE))
	os.Rename(filepath.Join(d, "n"), a)
	bb := mustLst(b)
	tick()
	o.e("exchange", unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE))
	o.p("exchanged", read(a)+","+read(b))
	o.p("exchange_times", changed(bb, mustLst(a)))
	o.e("exchange_missing", unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, filepath.Join(d, "none"), unix.RENAME_EXCHANGE))
	o.e("both_flags", unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE|unix.RENAME_NOREPLACE))
	o.e("unknown_flag", unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, 1<<10))
	// A directory and a file exchanged across parents: nlinks and "..".
	p1, p2 := filepath.Join(d, "p1"), filepath.Join(d, "p2")
	os.Mkdir(p1, 0o755)
	os.Mkdir(p2, 0o755)
	os.Mkdir(filepath.Join(p1, "sub"), 0o755)
	write(filepath.Join(p2, "f"), "F")
	o.e("exchange_dir_file", unix.Renameat2(unix.AT_FDCWD, filepath.Join(p1, "sub"), unix.AT_FDCWD, filepath.Join(p2, "f"), unix.RENAME_EXCHANGE))
	o.p("exchange_nlinks", fmt.Sprintf("%d,%d", mustLst(p1).Nlink, mustLst(p2).Nlink))
	o.p("exchange_types", fmt.Sprintf("%o,%o", mustLst(filepath.Join(p1, "sub")).Mode&unix.S_IFMT, mustLst(filepath.Join(p2, "f")).Mode&unix.S_IFMT))
	o.p("exchange_dotdot", mustLst(filepath.Join(p2, "f", "..")).Ino == mustLst(p2).Ino)
	// overlayfs asks for a whiteout on a rename.
	o.e("whiteout", unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, filepath.Join(d, "w"), unix.RENAME_WHITEOUT))
	st, err := lst(a)
	o.p("whiteout_left", fmt.Sprintf("%s:%o:%d", en(err), st.Mode&unix.S_IFMT, st.Rdev))
}

func checkRenameSelf(o *out, d string) {
	a := filepath.Join(d, "a")
	os.MkdirAll(filepath.Join(a, "sub", "deeper"), 0o755)
	o.e("into_child", unix.Rename(a, filepath.Join(a, "sub", "x")))
	o.e("into_grandchild", unix.Rename(a, filepath.Join(a, "sub", "deeper", "x")))
	o.e("over_child", unix.Rename(a, filepath.Join(a, "sub")))
	o.e("child_over_ancestor", unix.Rename(filepath.Join(a, "sub", "deeper"), a))
	o.e("exchange_with_child", unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, filepath.Join(a, "sub"), unix.RENAME_EXCHANGE))
	o.e("dir_to_self", unix.Rename(a, a))
}

func checkRenameCrossDir(o *out, d string) {
	p1, p2 := filepath.Join(d, "p1"), filepath.Join(d, "p2")
	os.Mkdir(p1, 0o755)
	os.Mkdir(p2, 0o755)
	os.Mkdir(filepath.Join(p1, "dir"), 0o755)
	write(filepath.Join(p1, "file"), "x")
	s1, s2, sd, sf := mustLst(p1), mustLst(p2), mustLst(filepath.Join(p1, "dir")), mustLst(filepath.Join(p1, "file"))
	tick()
	o.e("dir", unix.Rename(filepath.Join(p1, "dir"), filepath.Join(p2, "dir")))
	o.e("file", unix.Rename(filepath.Join(p1, "file"), filepath.Join(p2, "file")))
	n1, n2 := mustLst(p1), mustLst(p2)
	o.p("nlinks", fmt.Sprintf("%d->%d,%d->%d", s1.Nlink, n1.Nlink, s2.Nlink, n2.Nlink))
	o.p("dotdot_is_new_parent", mustLst(filepath.Join(p2, "dir", "..")).Ino == n2.Ino)
	o.p("old_parent_times", changed(s1, n1))
	o.p("new_parent_times", changed(s2, n2))
	o.p("moved_dir_times", changed(sd, mustLst(filepath.Join(p2, "dir"))))
	o.p("moved_file_times", changed(sf, mustLst(filepath.Join(p2, "file"))))
	// A directory moved over an empty one elsewhere.
	os.Mkdir(filepath.Join(p1, "empty"), 0o755)
	o.e("dir_over_empty_elsewhere", unix.Rename(filepath.Join(p2, "dir"), filepath.Join(p1, "empty")))
	o.p("nlinks_after", fmt.Sprintf("%d,%d", mustLst(p1).Nlink, mustLst(p2).Nlink))
}

func checkLink(o *out, d string) {
	f := filepath.Join(d, "f")
	write(f, "x")
	st := mustLst(f)
	tick()
	o.e("link", unix.Link(f, filepath.Join(d, "g")))
	o.p("nlink", mustLst(f).Nlink)
	o.p("link_times", changed(st, mustLst(f)))
	o.e("link_existing", unix.Link(f, filepath.Join(d, "g")))
	os.Mkdir(filepath.Join(d, "dir"), 0o755)
	o.e("link_dir", unix.Link(filepath.Join(d, "dir"), filepath.Join(d, "dir2")))
	o.e("link_missing", unix.Link(filepath.Join(d, "none"), filepath.Join(d, "h")))
	st = mustLst(f)
	tick()
	o.e("unlink", unix.Unlink(filepath.Join(d, "g")))
	o.p("nlink_after_unlink", mustLst(f).Nlink)
	o.p("unlink_times", changed(st, mustLst(f)))
	o.e("unlink_dir", unix.Unlink(filepath.Join(d, "dir")))
	o.e("unlink_missing", unix.Unlink(filepath.Join(d, "none")))
	os.Symlink("f", filepath.Join(d, "sl"))
	o.e("link_symlink_nofollow", unix.Linkat(unix.AT_FDCWD, filepath.Join(d, "sl"), unix.AT_FDCWD, filepath.Join(d, "sl2"), 0))
	o.p("linked_symlink_type", fmt.Sprintf("%o", mustLst(filepath.Join(d, "sl2")).Mode&unix.S_IFMT))
	o.e("link_symlink_follow", unix.Linkat(unix.AT_FDCWD, filepath.Join(d, "sl"), unix.AT_FDCWD, filepath.Join(d, "sl3"), unix.AT_SYMLINK_FOLLOW))
	o.p("followed_type", fmt.Sprintf("%o", mustLst(filepath.Join(d, "sl3")).Mode&unix.S_IFMT))
	o.p("nlink_final", mustLst(f).Nlink)
	for i := 0; i < 100; i++ {
		unix.Link(f, filepath.Join(d, fmt.Sprintf("l%03d", i)))
	}
	o.p("nlink_102", mustLst(f).Nlink)
	for i := 0; i < 100; i++ {
		unix.Unlink(filepath.Join(d, fmt.Sprintf("l%03d", i)))
	}
	o.p("nlink_back", mustLst(f).Nlink)
	// A directory's nlink counts its subdirectories.
	for i := 0; i < 3; i++ {
		os.Mkdir(filepath.Join(d, "dir", strconv.Itoa(i)), 0o755)
	}
	write(filepath.Join(d, "dir", "file"), "")
	o.p("dir_nlink", mustLst(filepath.Join(d, "dir")).Nlink)
}

func checkTmpfile(o *out, d string) {
	fd, err := unix.Open(d, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	o.e("open", err)
	if err != nil {
		return
	}
	unix.Write(fd, []byte("tmp"))
	o.p("nlink", fst(fd).Nlink)
	ents, _ := os.ReadDir(d)
	o.p("invisible", len(ents) == 0)
	o.e("linkat", unix.Linkat(fd, "", unix.AT_FDCWD, filepath.Join(d, "named"), unix.AT_EMPTY_PATH))
	o.p("named", read(filepath.Join(d, "named")))
	unix.Close(fd)
}

func checkSymlink(o *out, d string) {
	short, long := "target", strings.Repeat("t", 4095)
	o.e("short", unix.Symlink(short, filepath.Join(d, "s")))
	o.e("long_4095", unix.Symlink(long, filepath.Join(d, "l")))
	o.e("too_long_4096", unix.Symlink(long+"t", filepath.Join(d, "x")))
	o.e("empty_target", unix.Symlink("", filepath.Join(d, "e")))
	st := mustLst(filepath.Join(d, "l"))
	o.p("long_size", st.Size)
	o.p("mode", mode(mustLst(filepath.Join(d, "s"))))
	buf := make([]byte, 8192)
	n, err := unix.Readlink(filepath.Join(d, "l"), buf)
	o.p("readlink_long", fmt.Sprintf("%s:%d:%v", en(err), n, string(buf[:max(n, 0)]) == long))
	n, err = unix.Readlink(filepath.Join(d, "s"), buf[:3])
	o.p("readlink_short_buf", fmt.Sprintf("%s:%q", en(err), buf[:max(n, 0)]))
	write(filepath.Join(d, "file"), "x")
	_, err = unix.Readlink(filepath.Join(d, "file"), buf)
	o.e("readlink_file", err)
	o.e("over_existing", unix.Symlink("x", filepath.Join(d, "file")))
	unix.Symlink("b", filepath.Join(d, "a"))
	unix.Symlink("a", filepath.Join(d, "b"))
	_, err = unix.Open(filepath.Join(d, "a"), unix.O_RDONLY, 0)
	o.e("loop", err)
	// 40 links are followed; the 41st is ELOOP.
	for i := 1; i <= 41; i++ {
		unix.Symlink(fmt.Sprintf("c%d", i-1), filepath.Join(d, fmt.Sprintf("c%d", i)))
	}
	write(filepath.Join(d, "c0"), "end")
	o.p("chain_40", read(filepath.Join(d, "c40")))
	o.p("chain_41", read(filepath.Join(d, "c41")))
	_, err = unix.Open(filepath.Join(d, "s"), unix.O_RDONLY|unix.O_NOFOLLOW, 0)
	o.e("nofollow", err)
	fd, err := unix.Open(filepath.Join(d, "s"), unix.O_PATH|unix.O_NOFOLLOW, 0)
	o.e("opath_nofollow", err)
	if err == nil {
		unix.Close(fd)
	}
	o.e("dangling_stat", func() error { _, err := os.Stat(filepath.Join(d, "s")); return err }())
	o.e("lchown", unix.Lchown(filepath.Join(d, "s"), 7, 8))
	st = mustLst(filepath.Join(d, "s"))
	o.p("lchown_owner", fmt.Sprintf("%d:%d", st.Uid, st.Gid))
	o.e("chmod_via_link_dangling", unix.Chmod(filepath.Join(d, "s"), 0o600))
}

func checkChmod(o *out, d string) {
	f := filepath.Join(d, "f")
	write(f, "x")
	for _, m := range []uint32{0o7777, 0o4755, 0o2755, 0o1777, 0, 0o644} {
		err := unix.Chmod(f, m)
		o.p(fmt.Sprintf("file_%04o", m), en(err)+":"+mode(mustLst(f)))
	}
	dd := filepath.Join(d, "dir")
	os.Mkdir(dd, 0o755)
	for _, m := range []uint32{0o7777, 0o1777, 0o2755} {
		err := unix.Chmod(dd, m)
		o.p(fmt.Sprintf("dir_%04o", m), en(err)+":"+mode(mustLst(dd)))
	}
	// fchmod through an O_PATH fd is EBADF; fchmodat through /proc works.
	fd, _ := unix.Open(f, unix.O_PATH, 0)
	o.e("fchmod_opath", unix.Fchmod(fd, 0o600))
	unix.Close(fd)
	// Chmod as nobody of root's file: EPERM.
	o.p("chmod_other_owner", runChild(true, "op", "chmodself", f))
}

func init() {
	childOps["chmodself"] = func(args []string) string { return en(unix.Chmod(args[0], 0o777)) }
	childOps["chownself"] = func(args []string) string { return en(unix.Chown(args[0], 65534, -1)) }
	childOps["utimes_now"] = func(args []string) string { return en(unix.UtimesNanoAt(unix.AT_FDCWD, args[0], nil, 0)) }
	childOps["utimes_set"] = func(args []string) string {
		return en(unix.UtimesNanoAt(unix.AT_FDCWD, args[0], []unix.Timespec{{Sec: 5}, {Sec: 5}}, 0))
	}
	childOps["create_in"] = func(args []string) string {
		fd, err := unix.Open(filepath.Join(args[0], "byNobody"), unix.O_CREAT|unix.O_WRONLY, 0o644)
		if err == nil {
			unix.Close(fd)
		}
		return en(err)
	}
	childOps["unlink"] = func(args []string) string { return en(unix.Unlink(args[0])) }
	childOps["rename"] = func(args []string) string { return en(unix.Rename(args[0], args[1])) }
	childOps["open_rw"] = func(args []string) string {
		fd, err := unix.Open(args[0], unix.O_RDWR, 0)
		if err == nil {
			unix.Close(fd)
		}
		return en(err)
	}
}

var childOps = map[string]func([]string) string{}

func checkCreateMode(o *out, d string) {
	fd := openfd(filepath.Join(d, "suid"), unix.O_CREAT|unix.O_WRONLY, 0o4755)
	unix.Close(fd)
	o.p("open_04755", mode(mustLst(filepath.Join(d, "suid"))))
	fd = openfd(filepath.Join(d, "all"), unix.O_CREAT|unix.O_WRONLY, 0o7777)
	unix.Close(fd)
	o.p("open_07777", mode(mustLst(filepath.Join(d, "all"))))
	unix.Mkdir(filepath.Join(d, "sticky"), 0o1777)
	o.p("mkdir_01777", mode(mustLst(filepath.Join(d, "sticky"))))
	unix.Mkdir(filepath.Join(d, "sgid"), 0o2777)
	o.p("mkdir_02777", mode(mustLst(filepath.Join(d, "sgid"))))
	unix.Mkfifo(filepath.Join(d, "fifo"), 0o666)
	o.p("mkfifo_0666", mode(mustLst(filepath.Join(d, "fifo"))))
	st := mustLst(filepath.Join(d, "suid"))
	o.p("owner", fmt.Sprintf("%d:%d", st.Uid, st.Gid))
	// Sticky directory: nobody may not remove or rename root's file.
	unix.Chmod(filepath.Join(d, "sticky"), 0o1777)
	write(filepath.Join(d, "sticky", "roots"), "x")
	o.p("sticky_unlink_other", runChild(true, "op", "unlink", filepath.Join(d, "sticky", "roots")))
	o.p("sticky_rename_other", runChild(true, "op", "rename", filepath.Join(d, "sticky", "roots"), filepath.Join(d, "sticky", "mine")))
	o.p("sticky_create", runChild(true, "op", "create_in", filepath.Join(d, "sticky")))
	st = mustLst(filepath.Join(d, "sticky", "byNobody"))
	o.p("nobody_owner", fmt.Sprintf("%d:%d", st.Uid, st.Gid))
	o.p("nobody_unlink_own", runChild(true, "op", "unlink", filepath.Join(d, "sticky", "byNobody")))
	// Permission bits are checked: nobody cannot open 0644 root's file rw.
	o.p("perm_denied", runChild(true, "op", "open_rw", filepath.Join(d, "sticky", "roots")))
}

func checkSetgidDir(o *out, d string) {
	s := filepath.Join(d, "s")
	os.Mkdir(s, 0o755)
	unix.Chown(s, 0, 1234)
	unix.Chmod(s, 0o2775)
	write(filepath.Join(s, "f"), "x")
	os.Mkdir(filepath.Join(s, "sub"), 0o755)
	st := mustLst(filepath.Join(s, "f"))
	o.p("file_gid", st.Gid)
	st = mustLst(filepath.Join(s, "sub"))
	o.p("subdir_gid_mode", fmt.Sprintf("%d:%s", st.Gid, mode(st)))
	unix.Mkfifo(filepath.Join(s, "fifo"), 0o644)
	o.p("fifo_gid", mustLst(filepath.Join(s, "fifo")).Gid)
	unix.Symlink("x", filepath.Join(s, "sl"))
	o.p("symlink_gid", mustLst(filepath.Join(s, "sl")).Gid)
	// nobody, not in group 1234, must not get a setgid-1234 executable.
	unix.Chmod(s, 0o2777)
	o.p("nobody_sgid_exec", runChild(true, "op", "create_mode", filepath.Join(s, "nb-exec"), "2755"))
	st = mustLst(filepath.Join(s, "nb-exec"))
	o.p("nobody_sgid_exec_mode", fmt.Sprintf("%d:%s", st.Gid, mode(st)))
	o.p("nobody_sgid_noexec", runChild(true, "op", "create_mode", filepath.Join(s, "nb-noexec"), "2744"))
	st = mustLst(filepath.Join(s, "nb-noexec"))
	o.p("nobody_sgid_noexec_mode", fmt.Sprintf("%d:%s", st.Gid, mode(st)))
	fd := openfd(filepath.Join(s, "root-exec"), unix.O_CREAT|unix.O_WRONLY, 0o2755)
	unix.Close(fd)
	o.p("root_sgid_exec_mode", mode(mustLst(filepath.Join(s, "root-exec"))))
}

func init() {
	childOps["create_mode"] = func(args []string) string {
		m, _ := strconv.ParseUint(args[1], 8, 32)
		fd, err := unix.Open(args[0], unix.O_CREAT|unix.O_WRONLY, uint32(m))
		if err == nil {
			unix.Close(fd)
		}
		return en(err)
	}
}

func checkChown(o *out, d string) {
	f := filepath.Join(d, "f")
	write(f, "x")
	st := mustLst(f)
	tick()
	o.e("chown", unix.Chown(f, 1000, 2000))
	st2 := mustLst(f)
	o.p("owner", fmt.Sprintf("%d:%d", st2.Uid, st2.Gid))
	o.p("times", changed(st, st2))
	tick()
	o.e("chown_noop", unix.Chown(f, -1, -1))
	o.p("noop_times", changed(st2, mustLst(f)))
	o.e("chown_big", unix.Chown(f, 100000, 3000000000))
	st = mustLst(f)
	o.p("owner_big", fmt.Sprintf("%d:%d", st.Uid, st.Gid))
	// chown clears setuid, and setgid when group-executable, of non-dirs.
	for _, m := range []uint32{0o6755, 0o6745, 0o4700} {
		unix.Chmod(f, m)
		unix.Chown(f, 1, 1)
		o.p(fmt.Sprintf("clears_%04o", m), mode(mustLst(f)))
		unix.Chmod(f, m)
		unix.Chown(f, -1, -1)
		o.p(fmt.Sprintf("noop_clears_%04o", m), mode(mustLst(f)))
	}
	dd := filepath.Join(d, "dir")
	os.Mkdir(dd, 0o755)
	unix.Chmod(dd, 0o6755)
	unix.Chown(dd, 1, 1)
	o.p("dir_keeps", mode(mustLst(dd)))
	// Only root chowns: nobody cannot give away root's file.
	o.p("nobody_chown", runChild(true, "op", "chownself", f))
}

func checkSuidWrite(o *out, d string) {
	f := filepath.Join(d, "f")
	write(f, "x")
	unix.Chmod(f, 0o6777)
	// root (CAP_FSETID) keeps the bits on write.
	fd := openfd(f, unix.O_WRONLY|unix.O_APPEND, 0)
	unix.Write(fd, []byte("r"))
	unix.Close(fd)
	o.p("root_write", mode(mustLst(f)))
	o.p("nobody_write", runChild(true, "write", f))
	o.p("after_nobody_write", mode(mustLst(f)))
	unix.Chmod(f, 0o6777)
	o.p("nobody_truncate", runChild(true, "truncate", f))
	o.p("after_nobody_truncate", mode(mustLst(f)))
	unix.Chmod(f, 0o2767) // setgid without group exec: kept
	o.p("nobody_write_sgid_noexec", runChild(true, "write", f))
	o.p("after_sgid_noexec", mode(mustLst(f)))
}

func checkUtimens(o *out, d string) {
	f := filepath.Join(d, "f")
	write(f, "x")
	set := func(a, m unix.Timespec, flags int, p string) error {
		return unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{a, m}, flags)
	}
	st := mustLst(f)
	tick()
	o.e("set", set(unix.Timespec{Sec: 1, Nsec: 123456789}, unix.Timespec{Sec: 2, Nsec: 987654321}, 0, f))
	st2 := mustLst(f)
	o.p("atime", fmt.Sprintf("%d.%09d", st2.Atim.Sec, st2.Atim.Nsec))
	o.p("mtime", fmt.Sprintf("%d.%09d", st2.Mtim.Sec, st2.Mtim.Nsec))
	o.p("ctime_moved", st2.Ctim.Nano() > st.Ctim.Nano())
	o.e("omit_atime", set(unix.Timespec{Nsec: unix.UTIME_OMIT}, unix.Timespec{Sec: 3, Nsec: 5}, 0, f))
	st2 = mustLst(f)
	o.p("omit_kept", fmt.Sprintf("%d.%09d,%d.%09d", st2.Atim.Sec, st2.Atim.Nsec, st2.Mtim.Sec, st2.Mtim.Nsec))
	st = st2
	tick()
	o.e("both_omit", set(unix.Timespec{Nsec: unix.UTIME_OMIT}, unix.Timespec{Nsec: unix.UTIME_OMIT}, 0, f))
	o.p("both_omit_times", changed(st, mustLst(f)))
	o.e("now", set(unix.Timespec{Nsec: unix.UTIME_NOW}, unix.Timespec{Nsec: unix.UTIME_NOW}, 0, f))
	st2 = mustLst(f)
	now := time.Now().UnixNano()
	o.p("now_recent", now-st2.Mtim.Nano() < int64(10*time.Second) && now-st2.Atim.Nano() < int64(10*time.Second))
	o.e("pre_1970", set(unix.Timespec{Sec: -1, Nsec: 5}, unix.Timespec{Sec: -100000, Nsec: 0}, 0, f))
	st2 = mustLst(f)
	o.p("pre_1970_back", fmt.Sprintf("%d.%09d,%d", st2.Atim.Sec, st2.Atim.Nsec, st2.Mtim.Sec))
	o.e("y2242", set(unix.Timespec{Sec: 1 << 33}, unix.Timespec{Sec: 1<<33 + 7, Nsec: 9}, 0, f))
	st2 = mustLst(f)
	o.p("y2242_back", fmt.Sprintf("%d,%d.%09d", st2.Atim.Sec, st2.Mtim.Sec, st2.Mtim.Nsec))
	o.e("nsec_invalid", set(unix.Timespec{Sec: 1, Nsec: 1e9}, unix.Timespec{Sec: 1}, 0, f))
	unix.Symlink("f", filepath.Join(d, "sl"))
	o.e("symlink_nofollow", set(unix.Timespec{Sec: 10}, unix.Timespec{Sec: 11}, unix.AT_SYMLINK_NOFOLLOW, filepath.Join(d, "sl")))
	o.p("symlink_own_mtime", mustLst(filepath.Join(d, "sl")).Mtim.Sec)
	o.p("target_untouched", mustLst(f).Mtim.Sec != 11)
	// futimens on a read-only fd (the owner's).
	fd := openfd(f, unix.O_RDONLY, 0)
	o.e("futimens_rdonly", unix.UtimesNanoAt(fd, "", []unix.Timespec{{Sec: 20}, {Sec: 21}}, unix.AT_EMPTY_PATH))
	unix.Close(fd)
	o.p("futimens_mtime", mustLst(f).Mtim.Sec)
	// Others: UTIME_NOW needs write permission; explicit times need ownership.
	unix.Chmod(f, 0o666)
	o.p("nobody_now_writable", runChild(true, "op", "utimes_now", f))
	o.p("nobody_set_not_owner", runChild(true, "op", "utimes_set", f))
	unix.Chmod(f, 0o644)
	o.p("nobody_now_readonly", runChild(true, "op", "utimes_now", f))
	// Files left with set times, for -dump to compare to the nanosecond.
	for _, k := range []struct {
		name string
		ts   unix.Timespec
	}{{"keep_ns", unix.Timespec{Sec: 1234567890, Nsec: 123456789}}, {"keep_2242", unix.Timespec{Sec: 1<<33 + 7, Nsec: 9}}} {
		p := filepath.Join(d, k.name)
		write(p, k.name)
		o.e("set_"+k.name, set(k.ts, k.ts, 0, p))
	}
	os.Mkdir(filepath.Join(d, "dir"), 0o755)
	o.e("dir", set(unix.Timespec{Sec: 30}, unix.Timespec{Sec: 31, Nsec: 1}, 0, filepath.Join(d, "dir")))
	o.p("dir_mtime", fmt.Sprintf("%d.%09d", mustLst(filepath.Join(d, "dir")).Mtim.Sec, mustLst(filepath.Join(d, "dir")).Mtim.Nsec))
}

func checkTruncate(o *out, d string) {
	f := filepath.Join(d, "f")
	write(f, "0123456789")
	st := mustLst(f)
	tick()
	o.e("path_shrink", unix.Truncate(f, 4))
	st2 := mustLst(f)
	o.p("path_shrink_size", st2.Size)
	o.p("path_shrink_times", changed(st, st2))
	tick()
	o.e("path_same", unix.Truncate(f, 4))
	st3 := mustLst(f)
	o.p("path_same_times", changed(st2, st3))
	tick()
	o.e("path_grow", unix.Truncate(f, 100))
	st4 := mustLst(f)
	o.p("path_grow_times", changed(st3, st4))
	o.p("grown_content", read(f))
	fd := openfd(f, unix.O_RDWR, 0)
	tick()
	o.e("fd_same", unix.Ftruncate(fd, 100))
	st5 := mustLst(f)
	o.p("fd_same_times", changed(st4, st5))
	tick()
	o.e("fd_shrink", unix.Ftruncate(fd, 2))
	o.p("fd_shrink_times", changed(st5, mustLst(f)))
	o.p("fd_shrink_read", pread(fd, 100, 0))
	unix.Close(fd)
	o.e("negative", unix.Truncate(f, -1))
	os.Mkdir(filepath.Join(d, "dir"), 0o755)
	o.e("dir", unix.Truncate(filepath.Join(d, "dir"), 0))
	fd = openfd(f, unix.O_RDONLY, 0)
	o.e("fd_rdonly", unix.Ftruncate(fd, 0))
	unix.Close(fd)
	o.e("missing", unix.Truncate(filepath.Join(d, "none"), 0))
	// Shrinking then growing reads zeros where data was.
	write(f, "abcdefgh")
	unix.Truncate(f, 2)
	unix.Truncate(f, 8)
	o.p("regrow_zeros", read(f))
	// Shrinking to the middle of a block, then a read past it.
	big := bytes.Repeat([]byte("y"), 10000)
	os.WriteFile(f, big, 0o644)
	unix.Truncate(f, 5000)
	unix.Truncate(f, 10000)
	b, _ := os.ReadFile(f)
	o.p("regrow_block_tail", bytes.Count(b, []byte{0}))
}

func checkDirs(o *out, d string) {
	a := filepath.Join(d, "a")
	o.e("mkdir", unix.Mkdir(a, 0o777))
	st := mustLst(a)
	o.p("mode", mode(st))
	o.p("nlink", st.Nlink)
	o.p("size", st.Size)
	o.p("parent_nlink", mustLst(d).Nlink)
	o.e("mkdir_existing", unix.Mkdir(a, 0o755))
	write(filepath.Join(d, "file"), "x")
	o.e("mkdir_over_file", unix.Mkdir(filepath.Join(d, "file"), 0o755))
	o.e("mkdir_missing_parent", unix.Mkdir(filepath.Join(d, "none", "x"), 0o755))
	o.e("mkdir_under_file", unix.Mkdir(filepath.Join(d, "file", "x"), 0o755))
	o.e("mkdir_trailing_slash", unix.Mkdir(filepath.Join(d, "b")+"/", 0o755))
	unix.Symlink("a", filepath.Join(d, "la"))
	o.e("mkdir_over_symlink", unix.Mkdir(filepath.Join(d, "la"), 0o755))
	write(filepath.Join(a, "x"), "x")
	o.e("rmdir_nonempty", unix.Rmdir(a))
	o.e("rmdir_file", unix.Rmdir(filepath.Join(d, "file")))
	o.e("rmdir_missing", unix.Rmdir(filepath.Join(d, "none")))
	o.e("rmdir_dotdot", unix.Rmdir(a+"/.."))
	o.e("rmdir_symlink", unix.Rmdir(filepath.Join(d, "la")))
	os.Remove(filepath.Join(a, "x"))
	o.e("rmdir", unix.Rmdir(a))
	o.p("parent_nlink_after", mustLst(d).Nlink)
	o.e("rmdir_b", unix.Rmdir(filepath.Join(d, "b")))
	// An open directory that was removed: listing it finds nothing, creating in it ENOENT.
	os.Mkdir(a, 0o755)
	fd := openfd(a, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	unix.Rmdir(a)
	buf := make([]byte, 4096)
	n, err := unix.Getdents(fd, buf)
	o.p("removed_getdents", fmt.Sprintf("%s:%d", en(err), countDirents(buf[:max(n, 0)], false)))
	_, err = unix.Openat(fd, "new", unix.O_CREAT|unix.O_WRONLY, 0o644)
	o.e("create_in_removed", err)
	o.p("removed_nlink", fst(fd).Nlink)
	unix.Close(fd)
	// A process whose working directory is removed: "." still stats, and
	// nothing can be created there.
	os.Mkdir(a, 0o755)
	wd, _ := os.Getwd()
	os.Chdir(a)
	unix.Rmdir(a)
	_, err = lst(".")
	o.e("removed_cwd_stat", err)
	_, err = unix.Open("x", unix.O_CREAT|unix.O_WRONLY, 0o644)
	o.e("removed_cwd_create", err)
	os.Chdir(wd)
	// d_type of every kind of entry.
	t := filepath.Join(d, "types")
	os.Mkdir(t, 0o755)
	write(filepath.Join(t, "reg"), "")
	os.Mkdir(filepath.Join(t, "dir"), 0o755)
	unix.Symlink("x", filepath.Join(t, "lnk"))
	unix.Mkfifo(filepath.Join(t, "fifo"), 0o644)
	unix.Mknod(filepath.Join(t, "chr"), unix.S_IFCHR|0o644, 0)
	unix.Mknod(filepath.Join(t, "blk"), unix.S_IFBLK|0o644, int(unix.Mkdev(7, 0)))
	unix.Mknod(filepath.Join(t, "sock"), unix.S_IFSOCK|0o644, 0)
	fd = openfd(t, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	var names []string
	for {
		n, err := unix.Getdents(fd, buf)
		if n <= 0 || err != nil {
			break
		}
		names = append(names, direntTypes(buf[:n])...)
	}
	unix.Close(fd)
	sort.Strings(names)
	o.p("dtypes", strings.Join(names, ","))
}

// countDirents counts the entries in a getdents64 buffer, without . and
// .. unless dots.
func countDirents(b []byte, dots bool) int {
	n := 0
	for _, s := range direntTypes(b) {
		name := s[:strings.IndexByte(s, '=')]
		if !dots && (name == "." || name == "..") {
			continue
		}
		n++
	}
	return n
}

// direntTypes lists "name=dtype" of a getdents64 buffer.
func direntTypes(b []byte) []string {
	var out []string
	for len(b) >= 19 {
		reclen := int(*(*uint16)(unsafe.Pointer(&b[16])))
		if reclen == 0 || reclen > len(b) {
			break
		}
		typ := b[18]
		name := b[19:reclen]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		out = append(out, fmt.Sprintf("%s=%d", name, typ))
		b = b[reclen:]
	}
	return out
}

func checkOpenFlags(o *out, d string) {
	f := filepath.Join(d, "f")
	write(f, "abc")
	_, err := unix.Open(f, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
	o.e("excl_existing", err)
	unix.Symlink("target", filepath.Join(d, "dangling"))
	_, err = unix.Open(filepath.Join(d, "dangling"), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
	o.e("excl_dangling_symlink", err)
	fd, err := unix.Open(filepath.Join(d, "dangling"), unix.O_CREAT|unix.O_WRONLY, 0o644)
	o.e("creat_through_dangling", err)
	unix.Close(fd)
	_, err = lst(filepath.Join(d, "target"))
	o.e("target_made", err)
	// O_APPEND writes at the end, wherever the offset is; pwrite too (Linux).
	fd = openfd(f, unix.O_WRONLY|unix.O_APPEND, 0)
	unix.Seek(fd, 0, 0)
	unix.Write(fd, []byte("d"))
	unix.Pwrite(fd, []byte("e"), 0)
	off, _ := unix.Seek(fd, 0, 1)
	unix.Close(fd)
	o.p("append", read(f))
	o.p("append_offset", off)
	st := mustLst(f)
	tick()
	fd = openfd(f, unix.O_WRONLY|unix.O_TRUNC, 0)
	unix.Close(fd)
	st2 := mustLst(f)
	o.p("trunc_size", st2.Size)
	o.p("trunc_times", changed(st, st2))
	tick()
	fd = openfd(f, unix.O_WRONLY|unix.O_TRUNC, 0)
	unix.Close(fd)
	o.p("trunc_empty_times", changed(st2, mustLst(f)))
	write(f, "abc")
	fd = openfd(f, unix.O_RDONLY|unix.O_TRUNC, 0)
	unix.Close(fd)
	o.p("trunc_rdonly_size", mustLst(f).Size)
	_, err = unix.Open(f, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	o.e("directory_on_file", err)
	_, err = unix.Open(d, unix.O_WRONLY, 0)
	o.e("dir_wronly", err)
	_, err = unix.Open(d, unix.O_CREAT|unix.O_WRONLY, 0o644)
	o.e("creat_on_dir", err)
	_, err = unix.Open(f+"/", unix.O_RDONLY, 0)
	o.e("file_trailing_slash", err)
	_, err = unix.Open(filepath.Join(d, "new")+"/", unix.O_CREAT|unix.O_WRONLY, 0o644)
	o.e("creat_trailing_slash", err)
	_, err = unix.Open(filepath.Join(d, "none"), unix.O_RDONLY, 0)
	o.e("missing", err)
	_, err = unix.Open(filepath.Join(f, "x"), unix.O_RDONLY, 0)
	o.e("under_file", err)
	// Reading a write-only fd and writing a read-only one.
	fd = openfd(f, unix.O_WRONLY, 0)
	_, err = unix.Read(fd, make([]byte, 1))
	o.e("read_wronly", err)
	unix.Close(fd)
	fd = openfd(f, unix.O_RDONLY, 0)
	_, err = unix.Write(fd, []byte("x"))
	o.e("write_rdonly", err)
	unix.Close(fd)
	// Directory read(2) is EISDIR.
	fd = openfd(d, unix.O_RDONLY, 0)
	_, err = unix.Read(fd, make([]byte, 10))
	o.e("read_dir", err)
	unix.Close(fd)
	// Offsets: read at EOF returns 0; a write past EOF leaves a hole.
	fd = openfd(f, unix.O_RDWR, 0)
	n, err := unix.Pread(fd, make([]byte, 10), 100)
	o.p("read_past_eof", fmt.Sprintf("%s:%d", en(err), n))
	unix.Pwrite(fd, []byte("Z"), 10)
	unix.Close(fd)
	o.p("write_past_eof", read(f))
	// O_EXCL without O_CREAT on an existing file is allowed.
	fd, err = unix.Open(f, unix.O_RDONLY|unix.O_EXCL, 0)
	o.e("excl_without_creat", err)
	unix.Close(fd)
}

// seekp runs lseek and prints its offset or errno.
func seekp(fd int, off int64, whence int) string {
	n, err := unix.Seek(fd, off, whence)
	if err != nil {
		return en(err)
	}
	return strconv.FormatInt(n, 10)
}

func checkSparse(o *out, d string) {
	f := filepath.Join(d, "f")
	fd := openfd(f, unix.O_RDWR|unix.O_CREAT, 0o644)
	unix.Pwrite(fd, bytes.Repeat([]byte("d"), 4096), 1<<20)
	unix.Fsync(fd)
	st := fst(fd)
	o.p("size", st.Size)
	o.p("blocks_sparse", st.Blocks*512 < 1<<20)
	o.p("hole_reads_zero", pread(fd, 4, 4096))
	o.p("seek_data_0", seekp(fd, 0, unix.SEEK_DATA))
	o.p("seek_hole_0", seekp(fd, 0, unix.SEEK_HOLE))
	o.p("seek_hole_in_data", seekp(fd, 1<<20, unix.SEEK_HOLE))
	o.p("seek_data_eof", seekp(fd, st.Size, unix.SEEK_DATA))
	o.p("seek_hole_eof", seekp(fd, st.Size, unix.SEEK_HOLE))
	o.p("seek_end", seekp(fd, 0, unix.SEEK_END))
	o.p("seek_negative", seekp(fd, -1, unix.SEEK_SET))
	o.p("seek_past_end", seekp(fd, 1<<30, unix.SEEK_SET))
	// A hole at the end (ftruncate up) stays a hole.
	unix.Ftruncate(fd, 4<<20)
	unix.Fsync(fd)
	o.p("tail_hole", seekp(fd, (1<<20)+4096, unix.SEEK_DATA))
	o.p("blocks_after_grow", fst(fd).Blocks*512 < 1<<20)
	unix.Close(fd)
}

func checkFallocate(o *out, d string) {
	f := filepath.Join(d, "f")
	fd := openfd(f, unix.O_RDWR|unix.O_CREAT, 0o644)
	defer unix.Close(fd)
	data := bytes.Repeat([]byte("a"), 16384)
	unix.Pwrite(fd, data, 0)
	unix.Fsync(fd)
	o.e("mode0", unix.Fallocate(fd, 0, 0, 32768))
	o.p("mode0_size", fst(fd).Size)
	o.p("mode0_data_kept", pread(fd, 2, 0))
	b0 := fst(fd).Blocks
	o.e("keep_size", unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 32768, 65536))
	o.p("keep_size_size", fst(fd).Size)
	o.p("keep_size_blocks_grew", fst(fd).Blocks > b0)
	o.e("punch_hole", unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 4096, 4096))
	o.p("punched_read", pread(fd, 3, 4095))
	o.p("punched_size", fst(fd).Size)
	o.e("punch_without_keep", unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE, 0, 4096))
	o.e("punch_unaligned", unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 10000, 10))
	o.p("punch_unaligned_read", pread(fd, 12, 9999))
	o.e("zero_range", unix.Fallocate(fd, unix.FALLOC_FL_ZERO_RANGE, 8190, 4))
	o.p("zeroed_read", pread(fd, 6, 8189))
	o.e("zero_range_grow", unix.Fallocate(fd, unix.FALLOC_FL_ZERO_RANGE, 32768, 100))
	o.p("zero_range_grow_size", fst(fd).Size)
	o.e("collapse", unix.Fallocate(fd, unix.FALLOC_FL_COLLAPSE_RANGE, 0, 4096))
	o.e("insert", unix.Fallocate(fd, unix.FALLOC_FL_INSERT_RANGE, 0, 4096))
	o.e("zero_len", unix.Fallocate(fd, 0, 0, 0))
	o.e("negative", unix.Fallocate(fd, 0, -1, 10))
	rd := openfd(f, unix.O_RDONLY, 0)
	o.e("rdonly", unix.Fallocate(rd, 0, 0, 1<<20))
	unix.Close(rd)
	st := fst(fd)
	tick()
	unix.Fallocate(fd, 0, 0, 1<<20)
	o.p("grow_times", changed(st, fst(fd)))
	o.p("final_size", fst(fd).Size)
}

func checkLarge(o *out, d string) {
	f := filepath.Join(d, "f")
	fd := openfd(f, unix.O_RDWR|unix.O_CREAT, 0o644)
	defer unix.Close(fd)
	_, err := unix.Pwrite(fd, []byte("T"), 1<<40)
	o.e("write_1TiB", err)
	o.p("size_1TiB", fst(fd).Size)
	o.p("read_1TiB", pread(fd, 2, 1<<40))
	o.p("read_before", pread(fd, 2, 1<<40-1))
	const max4k = 1<<44 - 4096 // (2^32-1) blocks of 4 KiB, ext4's s_maxbytes
	_, err = unix.Pwrite(fd, []byte("E"), max4k-1)
	o.e("write_last_byte", err)
	o.p("size_max", fst(fd).Size)
	_, err = unix.Pwrite(fd, []byte("E"), max4k)
	o.e("write_past_max", err)
	n, err := unix.Pwrite(fd, []byte("EE"), max4k-1)
	o.p("write_across_max", fmt.Sprintf("%s:%d", en(err), n))
	o.e("truncate_max", unix.Ftruncate(fd, max4k))
	o.e("truncate_past_max", unix.Ftruncate(fd, max4k+1))
	o.e("truncate_2_63", unix.Ftruncate(fd, 1<<63-1))
	unix.Fsync(fd)
	o.e("truncate_back", unix.Ftruncate(fd, 10))
	o.p("blocks_after_back", fst(fd).Blocks <= 8)
	o.p("seek_max", seekp(fd, max4k, unix.SEEK_SET))
	o.p("seek_past_max", seekp(fd, max4k+1, unix.SEEK_SET))
}

func checkXattr(o *out, d string) {
	f := filepath.Join(d, "f")
	write(f, "x")
	get := func(p, name string, n int) string {
		b := make([]byte, n)
		m, err := unix.Lgetxattr(p, name, b)
		if err != nil {
			return en(err)
		}
		if n == 0 {
			return strconv.Itoa(m)
		}
		return strconv.Quote(string(b[:m]))
	}
	st := mustLst(f)
	tick()
	o.e("set_user", unix.Setxattr(f, "user.k", []byte("value"), 0))
	o.p("set_times", changed(st, mustLst(f)))
	o.p("get", get(f, "user.k", 100))
	o.p("get_size", get(f, "user.k", 0))
	o.p("get_small_buf", get(f, "user.k", 2))
	o.p("get_missing", get(f, "user.none", 10))
	o.e("create_existing", unix.Setxattr(f, "user.k", []byte("v2"), unix.XATTR_CREATE))
	o.e("replace_missing", unix.Setxattr(f, "user.none", []byte("v2"), unix.XATTR_REPLACE))
	o.e("replace", unix.Setxattr(f, "user.k", []byte("v2"), unix.XATTR_REPLACE))
	o.p("replaced", get(f, "user.k", 100))
	o.e("empty_value", unix.Setxattr(f, "user.empty", nil, 0))
	o.p("empty_get", get(f, "user.empty", 10))
	o.e("trusted", unix.Setxattr(f, "trusted.overlay.opaque", []byte("y"), 0))
	o.p("trusted_get", get(f, "trusted.overlay.opaque", 10))
	o.e("no_namespace", unix.Setxattr(f, "plain", []byte("v"), 0))
	o.e("empty_suffix", unix.Setxattr(f, "user.", []byte("v"), 0))
	o.e("name_255", unix.Setxattr(f, "user."+strings.Repeat("n", 250), []byte("v"), 0))
	o.e("name_256", unix.Setxattr(f, "user."+strings.Repeat("n", 251), []byte("v"), 0))
	o.e("value_64k_plus", unix.Setxattr(f, "user.big", make([]byte, 65537), 0))
	o.e("value_3000", unix.Setxattr(f, "user.v3000", bytes.Repeat([]byte("v"), 3000), 0))
	o.p("value_3000_size", get(f, "user.v3000", 0))
	b := make([]byte, 4096)
	n, err := unix.Llistxattr(f, b)
	var names []string
	for _, s := range strings.Split(string(b[:max(n, 0)]), "\x00") {
		if s != "" {
			names = append(names, s)
		}
	}
	sort.Strings(names)
	o.p("list", en(err)+":"+strings.Join(names, ","))
	n, err = unix.Llistxattr(f, nil)
	o.p("list_size", fmt.Sprintf("%s:%d", en(err), n))
	_, err = unix.Llistxattr(f, make([]byte, 3))
	o.e("list_small_buf", err)
	st = mustLst(f)
	tick()
	o.e("remove", unix.Removexattr(f, "user.k"))
	o.p("remove_times", changed(st, mustLst(f)))
	o.e("remove_missing", unix.Removexattr(f, "user.k"))
	// How many 1,000-byte values one inode holds (in-inode space and one block).
	g := filepath.Join(d, "g")
	write(g, "")
	count := 0
	var last error
	for i := 0; i < 10; i++ {
		if last = unix.Setxattr(g, fmt.Sprintf("user.fill%d", i), bytes.Repeat([]byte("f"), 1000), 0); last != nil {
			break
		}
		count++
	}
	o.p("fill_1000", fmt.Sprintf("%d:%s", count, en(last)))
	// user.* is not allowed on symlinks and special files; trusted.* is.
	unix.Symlink("f", filepath.Join(d, "sl"))
	o.e("user_on_symlink", unix.Lsetxattr(filepath.Join(d, "sl"), "user.k", []byte("v"), 0))
	o.e("trusted_on_symlink", unix.Lsetxattr(filepath.Join(d, "sl"), "trusted.k", []byte("v"), 0))
	o.p("trusted_on_symlink_get", get(filepath.Join(d, "sl"), "trusted.k", 10))
	unix.Mkfifo(filepath.Join(d, "fifo"), 0o644)
	o.e("user_on_fifo", unix.Lsetxattr(filepath.Join(d, "fifo"), "user.k", []byte("v"), 0))
	os.Mkdir(filepath.Join(d, "dir"), 0o755)
	o.e("trusted_opaque_dir", unix.Lsetxattr(filepath.Join(d, "dir"), "trusted.overlay.opaque", []byte("y"), 0))
	o.p("dir_get", get(filepath.Join(d, "dir"), "trusted.overlay.opaque", 10))
	o.e("user_on_dir", unix.Lsetxattr(filepath.Join(d, "dir"), "user.k", []byte("v"), 0))
	o.p("nobody_trusted_hidden", runChild(true, "op", "gettrusted", f))
	// Xattrs stay with the inode across a rename and a hard link.
	unix.Rename(f, filepath.Join(d, "f2"))
	unix.Link(filepath.Join(d, "f2"), filepath.Join(d, "f3"))
	o.p("after_rename_link", get(filepath.Join(d, "f3"), "trusted.overlay.opaque", 10))
}

func init() {
	childOps["gettrusted"] = func(args []string) string {
		b := make([]byte, 4096)
		n, err := unix.Listxattr(args[0], b)
		list := strings.Split(strings.TrimSuffix(string(b[:max(n, 0)]), "\x00"), "\x00")
		sort.Strings(list)
		names := strings.Join(list, ",")
		_, gerr := unix.Getxattr(args[0], "trusted.overlay.opaque", b)
		return en(err) + ":" + names + ":" + en(gerr)
	}
}

func checkMknod(o *out, d string) {
	o.e("fifo", unix.Mkfifo(filepath.Join(d, "fifo"), 0o644))
	o.p("fifo_type", fmt.Sprintf("%o", mustLst(filepath.Join(d, "fifo")).Mode&unix.S_IFMT))
	o.e("whiteout_0_0", unix.Mknod(filepath.Join(d, "wh"), unix.S_IFCHR, 0))
	st := mustLst(filepath.Join(d, "wh"))
	o.p("whiteout", fmt.Sprintf("%s:%d", mode(st), st.Rdev))
	o.e("chr_1_3", unix.Mknod(filepath.Join(d, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	st = mustLst(filepath.Join(d, "null"))
	o.p("chr_1_3_rdev", fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev)))
	o.e("blk_big", unix.Mknod(filepath.Join(d, "blk"), unix.S_IFBLK|0o600, int(unix.Mkdev(259, 70000))))
	st = mustLst(filepath.Join(d, "blk"))
	o.p("blk_big_rdev", fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev)))
	o.e("sock", unix.Mknod(filepath.Join(d, "sock"), unix.S_IFSOCK|0o644, 0))
	o.e("reg", unix.Mknod(filepath.Join(d, "reg"), unix.S_IFREG|0o644, 0))
	o.p("reg_type", fmt.Sprintf("%o", mustLst(filepath.Join(d, "reg")).Mode&unix.S_IFMT))
	o.e("zero_type", unix.Mknod(filepath.Join(d, "zero"), 0o644, 0))
	o.e("dir_type", unix.Mknod(filepath.Join(d, "dir"), unix.S_IFDIR|0o755, 0))
	o.e("existing", unix.Mknod(filepath.Join(d, "fifo"), unix.S_IFIFO|0o644, 0))
	// A fifo on the filesystem carries data between two opens.
	r, err := unix.Open(filepath.Join(d, "fifo"), unix.O_RDONLY|unix.O_NONBLOCK, 0)
	o.e("fifo_open_r", err)
	w, err := unix.Open(filepath.Join(d, "fifo"), unix.O_WRONLY|unix.O_NONBLOCK, 0)
	o.e("fifo_open_w", err)
	unix.Write(w, []byte("piped"))
	b := make([]byte, 10)
	n, err := unix.Read(r, b)
	o.p("fifo_data", fmt.Sprintf("%s:%q", en(err), b[:max(n, 0)]))
	unix.Close(w)
	unix.Close(r)
	o.p("fifo_size", mustLst(filepath.Join(d, "fifo")).Size)
	// The whiteout (0:0) cannot be opened; 1:3 is the null device.
	_, err = unix.Open(filepath.Join(d, "wh"), unix.O_RDONLY, 0)
	o.e("whiteout_open", err)
	fd, err := unix.Open(filepath.Join(d, "null"), unix.O_WRONLY, 0)
	o.e("chr_1_3_open", err)
	if err == nil {
		n, err := unix.Write(fd, []byte("gone"))
		o.p("chr_1_3_write", fmt.Sprintf("%s:%d", en(err), n))
		unix.Close(fd)
	}
	o.e("unlink_whiteout", unix.Unlink(filepath.Join(d, "wh")))
}

func checkReaddirMutate(o *out, d string) {
	const n = 300
	for i := 0; i < n; i++ {
		write(filepath.Join(d, fmt.Sprintf("file-%04d-padding-the-name", i)), "")
	}
	fd := openfd(d, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	seen := map[string]int{}
	buf := make([]byte, 1024)
	calls := 0
	for {
		m, err := unix.Getdents(fd, buf)
		if err != nil {
			o.e("getdents", err)
			break
		}
		if m == 0 {
			break
		}
		calls++
		for _, s := range direntTypes(buf[:m]) {
			seen[s[:strings.IndexByte(s, '=')]]++
		}
		// Between reads: remove one file of each 10 not seen yet and add new ones.
		if calls == 2 {
			for i := 0; i < n; i += 10 {
				os.Remove(filepath.Join(d, fmt.Sprintf("file-%04d-padding-the-name", i)))
			}
			for i := 0; i < 50; i++ {
				write(filepath.Join(d, fmt.Sprintf("new-%04d", i)), "")
			}
		}
	}
	dups, missing := 0, 0
	for name, c := range seen {
		if c > 1 {
			dups++
			_ = name
		}
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("file-%04d-padding-the-name", i)
		if i%10 != 0 && seen[name] == 0 {
			missing++
		}
	}
	o.p("several_reads", calls > 3)
	o.p("duplicates", dups)
	o.p("stable_missing", missing)
	o.p("dots", fmt.Sprintf("%d,%d", seen["."], seen[".."]))
	// After a rewind, the listing is what the directory holds now.
	unix.Seek(fd, 0, 0)
	now := 0
	for {
		m, err := unix.Getdents(fd, buf)
		if err != nil || m == 0 {
			break
		}
		now += countDirents(buf[:m], false)
	}
	o.p("after_rewind", now)
	unix.Close(fd)
	// Removing every entry while listing (rm -rf's pattern) leaves it empty.
	fd = openfd(d, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	removed := 0
	for {
		m, err := unix.Getdents(fd, buf)
		if err != nil || m == 0 {
			break
		}
		for _, s := range direntTypes(buf[:m]) {
			name := s[:strings.IndexByte(s, '=')]
			if name != "." && name != ".." && unix.Unlink(filepath.Join(d, name)) == nil {
				removed++
			}
		}
	}
	unix.Close(fd)
	ents, _ := os.ReadDir(d)
	o.p("rm_rf", fmt.Sprintf("%d,%d", removed, len(ents)))
	o.e("rmdir_after", unix.Rmdir(d))
	os.Mkdir(d, 0o755)
}

func checkStatfs(o *out, d string) {
	var s unix.Statfs_t
	o.e("statfs", unix.Statfs(d, &s))
	o.p("type", fmt.Sprintf("%#x", s.Type))
	o.p("bsize", s.Bsize)
	o.p("namelen", s.Namelen)
	o.p("sane", s.Blocks > 0 && s.Bfree <= s.Blocks && s.Bavail <= s.Bfree && s.Files > 0 && s.Ffree <= s.Files)
	f := filepath.Join(d, "f")
	before := s.Bfree
	ffree := s.Ffree
	fd := openfd(f, unix.O_RDWR|unix.O_CREAT, 0o644)
	unix.Write(fd, bytes.Repeat([]byte("s"), 8<<20))
	unix.Fsync(fd)
	unix.Close(fd)
	unix.Statfs(d, &s)
	o.p("bfree_drops_after_fsync", before-s.Bfree >= (8<<20)/uint64(s.Bsize))
	o.p("ffree_drops", ffree > s.Ffree)
	before = s.Bfree
	os.Remove(f)
	unix.Sync()
	unix.Statfs(d, &s)
	o.p("bfree_back_after_unlink", s.Bfree-before >= (8<<20)/uint64(s.Bsize))
	fd = openfd(d, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	o.e("fstatfs", unix.Fstatfs(fd, &s))
	unix.Close(fd)
}

func checkFsync(o *out, d string) {
	f := filepath.Join(d, "f")
	write(f, "x")
	fd := openfd(d, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	o.e("dir", unix.Fsync(fd))
	o.e("dir_fdatasync", unix.Fdatasync(fd))
	o.e("syncfs", unix.Syncfs(fd))
	unix.Close(fd)
	fd = openfd(f, unix.O_RDONLY, 0)
	o.e("file_rdonly", unix.Fsync(fd))
	o.e("sync_file_range", unix.SyncFileRange(fd, 0, 0, unix.SYNC_FILE_RANGE_WRITE))
	unix.Close(fd)
	fd = openfd(f, unix.O_WRONLY|unix.O_SYNC, 0)
	_, err := unix.Write(fd, []byte("sync"))
	o.e("o_sync_write", err)
	unix.Close(fd)
	fd = openfd(f, unix.O_WRONLY|unix.O_DSYNC, 0)
	_, err = unix.Write(fd, []byte("dsync"))
	o.e("o_dsync_write", err)
	unix.Close(fd)
	fd, err = unix.Open(f, unix.O_RDONLY|unix.O_DIRECT, 0)
	o.e("o_direct_open", err)
	if err == nil {
		unix.Close(fd)
	}
	fd = openfd(f, unix.O_PATH, 0)
	o.e("opath_fsync", unix.Fsync(fd))
	unix.Close(fd)
}

func checkFlock(o *out, d string) {
	f := filepath.Join(d, "f")
	write(f, "x")
	a := openfd(f, unix.O_RDWR, 0)
	b := openfd(f, unix.O_RDWR, 0)
	defer unix.Close(a)
	defer unix.Close(b)
	o.e("ex", unix.Flock(a, unix.LOCK_EX))
	o.e("ex_other_nb", unix.Flock(b, unix.LOCK_EX|unix.LOCK_NB))
	o.e("sh_other_nb", unix.Flock(b, unix.LOCK_SH|unix.LOCK_NB))
	o.e("un", unix.Flock(a, unix.LOCK_UN))
	o.e("sh", unix.Flock(a, unix.LOCK_SH))
	o.e("sh_other", unix.Flock(b, unix.LOCK_SH|unix.LOCK_NB))
	o.e("ex_upgrade_nb", unix.Flock(a, unix.LOCK_EX|unix.LOCK_NB))
	unix.Flock(b, unix.LOCK_UN)
	o.e("ex_upgrade", unix.Flock(a, unix.LOCK_EX|unix.LOCK_NB))
	// A lock follows the open file, not the name: held across a rename and an unlink.
	unix.Rename(f, filepath.Join(d, "g"))
	c := openfd(filepath.Join(d, "g"), unix.O_RDONLY, 0)
	o.e("after_rename", unix.Flock(c, unix.LOCK_SH|unix.LOCK_NB))
	unix.Close(c)
	o.e("dir", unix.Flock(openfd(d, unix.O_RDONLY, 0), unix.LOCK_EX|unix.LOCK_NB))
}

func checkFcntlLock(o *out, d string) {
	f := filepath.Join(d, "f")
	write(f, strings.Repeat("x", 100))
	a := openfd(f, unix.O_RDWR, 0)
	b := openfd(f, unix.O_RDWR, 0)
	defer unix.Close(a)
	defer unix.Close(b)
	lk := func(fd, cmd int, typ int16, start, n int64) (unix.Flock_t, error) {
		l := unix.Flock_t{Type: typ, Whence: 0, Start: start, Len: n}
		err := unix.FcntlFlock(uintptr(fd), cmd, &l)
		return l, err
	}
	_, err := lk(a, unix.F_OFD_SETLK, unix.F_WRLCK, 0, 10)
	o.e("ofd_wr", err)
	_, err = lk(b, unix.F_OFD_SETLK, unix.F_WRLCK, 5, 10)
	o.e("ofd_conflict", err)
	_, err = lk(b, unix.F_OFD_SETLK, unix.F_RDLCK, 10, 10)
	o.e("ofd_adjacent", err)
	l, err := lk(b, unix.F_OFD_GETLK, unix.F_WRLCK, 0, 5)
	o.p("ofd_getlk", fmt.Sprintf("%s:type=%d:%d+%d:pid=%d", en(err), l.Type, l.Start, l.Len, l.Pid))
	_, err = lk(a, unix.F_OFD_SETLK, unix.F_UNLCK, 0, 10)
	o.e("ofd_unlock", err)
	_, err = lk(b, unix.F_OFD_SETLK, unix.F_WRLCK, 0, 5)
	o.e("ofd_after_unlock", err)
	lk(b, unix.F_OFD_SETLK, unix.F_UNLCK, 0, 0)
	// Process-associated locks: another process sees this one's.
	_, err = lk(a, unix.F_SETLK, unix.F_WRLCK, 0, 10)
	o.e("posix_wr", err)
	o.p("posix_other_process", runChild(false, "getlk", f))
	_, err = lk(b, unix.F_SETLK, unix.F_WRLCK, 0, 10)
	o.e("posix_same_process", err)
	rd := openfd(f, unix.O_RDONLY, 0)
	_, err = lk(rd, unix.F_SETLK, unix.F_WRLCK, 50, 1)
	o.e("posix_wr_on_rdonly", err)
	unix.Close(rd) // closing any fd drops this process's locks
	o.p("posix_after_close", runChild(false, "getlk", f))
}

func checkNames(o *out, d string) {
	n255 := strings.Repeat("n", 255)
	n256 := strings.Repeat("n", 256)
	fd, err := unix.Open(filepath.Join(d, n255), unix.O_CREAT|unix.O_WRONLY, 0o644)
	o.e("create_255", err)
	unix.Close(fd)
	_, err = lst(filepath.Join(d, n255))
	o.e("stat_255", err)
	// Before any listing of d: gVisor answers lookups in a directory it
	// has listed from that listing, without asking the filesystem.
	_, err = lst(filepath.Join(d, n256))
	o.e("stat_256", err)
	ents, _ := os.ReadDir(d)
	o.p("listed_255", len(ents) == 1 && ents[0].Name() == n255)
	_, err = unix.Open(filepath.Join(d, n256), unix.O_CREAT|unix.O_WRONLY, 0o644)
	o.e("create_256", err)
	o.e("mkdir_256", unix.Mkdir(filepath.Join(d, n256), 0o755))
	o.e("symlink_256", unix.Symlink("x", filepath.Join(d, n256)))
	o.e("rename_to_256", unix.Rename(filepath.Join(d, n255), filepath.Join(d, n256)))
	o.e("link_to_256", unix.Link(filepath.Join(d, n255), filepath.Join(d, n256)))
	o.e("mkdir_255", unix.Mkdir(filepath.Join(d, "d"+n255[1:]), 0o755))
	long := strings.Repeat("./", 2048) + "x"
	_, err = unix.Open(filepath.Join(d, "x"), unix.O_CREAT|unix.O_WRONLY, 0o644)
	o.e("create_x", err)
	wd, _ := os.Getwd()
	os.Chdir(d)
	_, err = lst(long)
	o.e("path_4097", err)
	_, err = lst(long[4:])
	o.e("path_4093", err)
	os.Chdir(wd)
	odd := []string{"with space", "new\nline", "ütf-8-ñ", "\x01ctl", "-dash", "..." /* a name, not a parent */, "a:b", "back\\slash", string([]byte{0xff, 0xfe})}
	for i, n := range odd {
		err := write(filepath.Join(d, n), n)
		o.p(fmt.Sprintf("odd_%d", i), en(err)+":"+read(filepath.Join(d, n)))
	}
	// Names differing only in case are two files (ext4 is case-sensitive).
	write(filepath.Join(d, "Case"), "1")
	write(filepath.Join(d, "case"), "2")
	o.p("case_sensitive", read(filepath.Join(d, "Case"))+","+read(filepath.Join(d, "case")))
	o.e("empty_name", func() error { _, err := unix.Open("", unix.O_RDONLY, 0); return err }())
}

// checkTimes: which of mtime and ctime each operation moves, on the file
// and on its directory.
func checkTimes(o *out, d string) {
	f := filepath.Join(d, "f")
	write(f, "x")
	op := func(name string, fn func()) {
		sf, sd := mustLst(f), mustLst(d)
		tick()
		fn()
		o.p(name, "file="+changed(sf, mustLst(f))+" dir="+changed(sd, mustLst(d)))
	}
	var fd int
	op("open_rdwr", func() { fd = openfd(f, unix.O_RDWR, 0) })
	op("write", func() { unix.Write(fd, []byte("y")) })
	op("write_0", func() { unix.Write(fd, nil) })
	op("pwrite", func() { unix.Pwrite(fd, []byte("z"), 100) })
	op("read", func() { unix.Pread(fd, make([]byte, 10), 0) })
	op("ftruncate", func() { unix.Ftruncate(fd, 5) })
	op("fsync", func() { unix.Fsync(fd) })
	op("fallocate", func() { unix.Fallocate(fd, 0, 0, 8192) })
	op("fallocate_inside", func() { unix.Fallocate(fd, 0, 0, 10) })
	op("mmap_write", func() {
		m, err := unix.Mmap(fd, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err == nil {
			m[0] = 'M'
			unix.Msync(m, unix.MS_SYNC)
			unix.Munmap(m)
		}
	})
	op("close", func() { unix.Close(fd) })
	op("chmod", func() { unix.Chmod(f, 0o600) })
	op("chmod_same", func() { unix.Chmod(f, 0o600) })
	op("chown", func() { unix.Chown(f, 5, 5) })
	op("setxattr", func() { unix.Setxattr(f, "user.t", []byte("v"), 0) })
	op("removexattr", func() { unix.Removexattr(f, "user.t") })
	op("utimens_now", func() { unix.UtimesNanoAt(unix.AT_FDCWD, f, nil, 0) })
	op("link", func() { unix.Link(f, filepath.Join(d, "g")) })
	op("unlink_other_name", func() { unix.Unlink(filepath.Join(d, "g")) })
	op("rename", func() { unix.Rename(f, filepath.Join(d, "f2")); f = filepath.Join(d, "f2") })
	op("create_other", func() { write(filepath.Join(d, "other"), "") })
	op("write_other", func() { write(filepath.Join(d, "other"), "data") })
	op("rename_over", func() { unix.Rename(filepath.Join(d, "other"), filepath.Join(d, "f3")) })
	op("mkdir", func() { os.Mkdir(filepath.Join(d, "sub"), 0o755) })
	op("create_in_sub", func() { write(filepath.Join(d, "sub", "x"), "") })
	op("rmdir", func() { os.Remove(filepath.Join(d, "sub", "x")); os.Remove(filepath.Join(d, "sub")) })
	op("symlink", func() { unix.Symlink("f2", filepath.Join(d, "sl")) })
	op("mknod", func() { unix.Mkfifo(filepath.Join(d, "fifo"), 0o644) })
	op("lookup_missing", func() { lst(filepath.Join(d, "none")) })
	op("failed_create", func() { unix.Open(f, unix.O_CREAT|unix.O_EXCL, 0o644) })
	op("truncate_path", func() { unix.Truncate(f, 1) })
	op("truncate_path_same", func() { unix.Truncate(f, 1) })
	op("o_trunc", func() { unix.Close(openfd(f, unix.O_WRONLY|unix.O_TRUNC, 0)) })
	op("unlink_last", func() { fd = openfd(f, unix.O_RDONLY, 0); unix.Unlink(filepath.Join(d, "f3")) })
	unix.Close(fd)
	// A new file's three times are equal and at least its directory's mtime.
	write(filepath.Join(d, "new"), "")
	st := mustLst(filepath.Join(d, "new"))
	o.p("new_times_equal", fmt.Sprintf("a=m:%v m=c:%v", st.Atim == st.Mtim, st.Mtim == st.Ctim))
	o.p("new_dir_times_equal", mustLst(d).Mtim == mustLst(d).Ctim)
	o.p("ns_precision", st.Mtim.Nsec%1000 != 0 || mustLst(d).Mtim.Nsec%1000 != 0)
}

func checkMmap(o *out, d string) {
	f := filepath.Join(d, "f")
	write(f, strings.Repeat("a", 5000))
	fd := openfd(f, unix.O_RDWR, 0)
	defer unix.Close(fd)
	m, err := unix.Mmap(fd, 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	o.e("shared", err)
	if err != nil {
		return
	}
	m[4999] = 'Z'
	o.e("msync", unix.Msync(m, unix.MS_SYNC))
	o.p("read_sees_map", pread(fd, 2, 4998))
	unix.Pwrite(fd, []byte("W"), 10)
	o.p("map_sees_write", string(m[10]))
	o.p("tail_of_page_zero", m[5000] == 0 && m[4095] == 'a')
	unix.Munmap(m)
	o.p("size_unchanged", fst(fd).Size)
	p, err := unix.Mmap(fd, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
	o.e("private", err)
	if err == nil {
		p[0] = 'P'
		unix.Munmap(p)
		o.p("private_not_written", pread(fd, 1, 0))
	}
	ro := openfd(f, unix.O_RDONLY, 0)
	_, err = unix.Mmap(ro, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	o.e("shared_write_on_rdonly", err)
	unix.Close(ro)
	// Truncate under a mapping, then grow: the tail reads zeros.
	m, _ = unix.Mmap(fd, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	unix.Ftruncate(fd, 100)
	unix.Ftruncate(fd, 4096)
	o.p("truncated_under_map", fmt.Sprintf("%q", m[98:102]))
	unix.Munmap(m)
}

// dump prints one line per entry under dir, sorted by path, with nothing
// that differs between two mounts of the same filesystem (no inode
// numbers, no atimes or ctimes, which the Sentry keeps by its own clock).
func dump(dir string) int {
	var lines []string
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			lines = append(lines, fmt.Sprintf("%s walk %s", p, en(err)))
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		st, err := lst(p)
		if err != nil {
			lines = append(lines, fmt.Sprintf("%q lstat %s", rel, en(err)))
			return nil
		}
		line := fmt.Sprintf("%q %s %d:%d size=%d", rel, mode(st), st.Uid, st.Gid, st.Size)
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			line += fmt.Sprintf(" nlink=%d", st.Nlink)
		}
		if t := st.Mode & unix.S_IFMT; t == unix.S_IFCHR || t == unix.S_IFBLK {
			line += fmt.Sprintf(" rdev=%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
		}
		line += fmt.Sprintf(" mtime=%d.%09d", st.Mtim.Sec, st.Mtim.Nsec)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			t, _ := os.Readlink(p)
			line += fmt.Sprintf(" -> %q", t)
		case unix.S_IFREG:
			if b, err := os.ReadFile(p); err != nil {
				line += " data=" + en(err)
			} else {
				line += fmt.Sprintf(" data=%x", sha256.Sum256(b))
			}
		}
		buf := make([]byte, 65536)
		if n, err := unix.Llistxattr(p, buf); err == nil && n > 0 {
			names := strings.Split(strings.TrimSuffix(string(buf[:n]), "\x00"), "\x00")
			sort.Strings(names)
			for _, name := range names {
				v := make([]byte, 65536)
				m, err := unix.Lgetxattr(p, name, v)
				line += fmt.Sprintf(" %s=%s:%x", name, en(err), sha256.Sum256(v[:max(m, 0)]))
			}
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "posixcheck -dump:", err)
		return 1
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	return 0
}

// checkData: a fixed sequence of writes, truncates and extensions at
// offsets across block boundaries; the file's size and hash must be the
// kernel's, through read(2) and through a mapping.
func checkData(o *out, d string) {
	f := filepath.Join(d, "f")
	fd := openfd(f, unix.O_RDWR|unix.O_CREAT, 0o644)
	defer unix.Close(fd)
	x := uint64(0x9e3779b97f4a7c15)
	next := func(n uint64) uint64 { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return x % n }
	var failed error
	for i := 0; i < 300; i++ {
		switch op := next(10); {
		case op < 7:
			off := int64(next(8 << 20))
			if next(3) == 0 {
				off = off&^4095 - int64(next(3)) // just before a block boundary
				off = max(off, 0)
			}
			b := make([]byte, 1+next(20000))
			for j := range b {
				b[j] = byte(next(256))
			}
			if _, err := unix.Pwrite(fd, b, off); err != nil && failed == nil {
				failed = err
			}
		case op < 9:
			if err := unix.Ftruncate(fd, int64(next(9<<20))); err != nil && failed == nil {
				failed = err
			}
		default:
			if err := unix.Fallocate(fd, 0, int64(next(8<<20)), int64(1+next(1<<20))); err != nil && failed == nil {
				failed = err
			}
		}
	}
	o.e("ops", failed)
	unix.Fsync(fd)
	st := fst(fd)
	o.p("size", st.Size)
	b, err := os.ReadFile(f)
	o.p("sha256", fmt.Sprintf("%s:%x", en(err), sha256.Sum256(b)))
	if st.Size > 0 {
		m, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ, unix.MAP_SHARED)
		if err == nil {
			o.p("mmap_same", bytes.Equal(m, b))
			unix.Munmap(m)
		} else {
			o.e("mmap", err)
		}
	}
}

// checkBigdir: a directory of 3,000 entries (an htree on ext4) through
// creation, renames within it, removals and a listing.
func checkBigdir(o *out, d string) {
	const n = 3000
	name := func(i int) string { return fmt.Sprintf("entry-%05d-with-a-longer-name-to-fill-blocks", i) }
	var failed error
	for i := 0; i < n; i++ {
		if err := write(filepath.Join(d, name(i)), strconv.Itoa(i)); err != nil && failed == nil {
			failed = err
		}
	}
	o.e("create", failed)
	failed = nil
	for i := 0; i < n; i += 3 {
		if err := unix.Rename(filepath.Join(d, name(i)), filepath.Join(d, "renamed-"+name(i))); err != nil && failed == nil {
			failed = err
		}
		if err := unix.Unlink(filepath.Join(d, name(i+1))); err != nil && failed == nil {
			failed = err
		}
	}
	o.e("rename_unlink", failed)
	ents, err := os.ReadDir(d)
	o.p("listed", fmt.Sprintf("%s:%d", en(err), len(ents)))
	o.p("read_renamed", read(filepath.Join(d, "renamed-"+name(2997))))
	o.p("read_kept", read(filepath.Join(d, name(2999))))
	_, err = lst(filepath.Join(d, name(1)))
	o.e("removed_gone", err)
	o.p("nlink", mustLst(d).Nlink)
}

// checkAppendTwo: two processes append 2,000 records each with O_APPEND;
// none is lost or torn.
func checkAppendTwo(o *out, d string) {
	f := filepath.Join(d, "log")
	write(f, "")
	self, _ := os.Executable()
	var cmds []*exec.Cmd
	for _, tag := range []string{"a", "b"} {
		c := exec.Command(self, "-child", "append", f, tag)
		c.Start()
		cmds = append(cmds, c)
	}
	for _, c := range cmds {
		c.Wait()
	}
	b, _ := os.ReadFile(f)
	o.p("size", len(b))
	seen := map[string]bool{}
	torn := 0
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if len(l) != 15 {
			torn++
		}
		seen[l] = true
	}
	o.p("records", fmt.Sprintf("%d torn=%d", len(seen), torn))
}
