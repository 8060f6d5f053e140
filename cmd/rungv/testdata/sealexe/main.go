// Command sealexe does, inside an episode, what runc >= 1.2 does before
// every "runc create" and "runc exec" to protect its binary
// (libcontainer/exeseal, CVE-2019-5736): it seals /proc/self/exe in a
// read-only overlay made with the new mount API, opens itself through it
// O_PATH and re-executes that file as /proc/self/fd/N. Then, as a
// container's process would, it tries to write the binary through every
// handle it has. One "step: result" line per step; exit 0 only when the
// sealed path works and every write is refused (TestRuncSealedExe).
//
// usage: sealexe [-noxino] DUMMYDIR   (DUMMYDIR: runc's state directory)
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

func errName(err error) string {
	var e unix.Errno
	if errors.As(err, &e) {
		return unix.ErrnoName(e)
	}
	return err.Error()
}

func step(name string, err error) {
	if err != nil {
		fmt.Printf("%s: %s\n", name, errName(err))
		return
	}
	fmt.Printf("%s: ok\n", name)
}

// refused reports an attempt that must fail.
func refused(name string, fd int, err error) bool {
	if err == nil {
		unix.Close(fd)
		fmt.Printf("%s: OPENED FOR WRITING\n", name)
		return false
	}
	fmt.Printf("%s: refused %s\n", name, errName(err))
	return true
}

func child() int {
	exe, _ := os.Readlink("/proc/self/exe")
	fmt.Printf("child: running %s\n", exe)
	ok := true
	for _, fl := range []int{unix.O_WRONLY, unix.O_RDWR, unix.O_WRONLY | unix.O_TRUNC} {
		fd, err := unix.Open("/proc/self/exe", fl|unix.O_CLOEXEC, 0)
		ok = refused(fmt.Sprintf("child-write-proc-self-exe-%#x", fl), fd, err) && ok
	}
	if !ok {
		return 1
	}
	return 0
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == "child" {
		os.Exit(child())
	}
	args := os.Args[1:]
	xino := true
	if len(args) > 0 && args[0] == "-noxino" {
		xino, args = false, args[1:]
	}
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: sealexe [-noxino] DUMMYDIR")
		os.Exit(2)
	}
	os.Exit(parent(args[0], xino))
}

func parent(dummy string, xino bool) int {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		step("readlink", err)
		return 1
	}
	dir, name := filepath.Split(exe)

	ctx, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	step("fsopen", err)
	if err != nil {
		return 1
	}
	err = unix.FsconfigSetString(ctx, "lowerdir", dir+":"+dummy)
	step("lowerdir", err)
	if err != nil {
		return 1
	}
	if xino {
		// runc ignores this one's error; it is reported here all the same.
		step("xino", unix.FsconfigSetString(ctx, "xino", "off"))
	}
	err = unix.FsconfigCreate(ctx)
	step("create", err)
	if err != nil {
		return 3 // runc falls back to its memfd copy here
	}
	mnt, err := unix.Fsmount(ctx, unix.FSMOUNT_CLOEXEC, unix.MS_RDONLY|unix.MS_NODEV|unix.MS_NOSUID)
	step("fsmount", err)
	if err != nil {
		return 1
	}
	unix.Close(ctx)
	fd, err := unix.Openat(mnt, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	step("openat", err)
	if err != nil {
		return 1
	}
	var st unix.Statfs_t
	err = unix.Fstatfs(fd, &st)
	if err == nil && st.Type != unix.OVERLAYFS_SUPER_MAGIC {
		err = fmt.Errorf("f_type %#x, not overlayfs", st.Type)
	}
	step("statfs-overlay", err)
	if err != nil {
		return 1
	}

	// xino=on asks for inode numbers gVisor's overlay does not promise: it
	// must still refuse it (Linux takes it; TestRuncSealedExe checks this
	// line in an episode only).
	on, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err == nil {
		err = unix.FsconfigSetString(on, "lowerdir", dir+":"+dummy)
	}
	if err == nil {
		err = unix.FsconfigSetString(on, "xino", "on")
	}
	if err == nil {
		err = unix.FsconfigCreate(on)
	}
	unix.Close(on)
	if err == nil {
		fmt.Println("xino-on-create: ok")
	} else {
		fmt.Printf("xino-on-create: refused %s\n", errName(err))
	}

	// A container's process gets at the binary through these handles.
	ok := true
	fdPath := "/proc/self/fd/" + strconv.Itoa(fd)
	for _, fl := range []int{unix.O_WRONLY, unix.O_RDWR} {
		w, err := unix.Open(fdPath, fl|unix.O_CLOEXEC, 0)
		ok = refused(fmt.Sprintf("write-proc-fd-%#x", fl), w, err) && ok
		w, err = unix.Openat(mnt, name, fl|unix.O_CLOEXEC, 0)
		ok = refused(fmt.Sprintf("write-through-mount-%#x", fl), w, err) && ok
	}
	c, err := unix.Openat(mnt, name+".new", unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o755)
	ok = refused("create-in-mount", c, err) && ok
	err = unix.Renameat(mnt, name, mnt, name+".old")
	if err == nil {
		fmt.Println("rename-in-mount: RENAMED")
		ok = false
	} else {
		fmt.Printf("rename-in-mount: refused %s\n", errName(err))
	}

	// runc: exec.Command("/proc/self/fd/N", "init").
	cmd := exec.Command(fdPath, "child")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	err = cmd.Run()
	step("exec", err)
	if err != nil || !ok {
		return 1
	}
	fmt.Println("result: sealed")
	return 0
}
