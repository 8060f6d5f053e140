package runtime

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Descriptors handed down the process tree (host side → supervisor →
// init): each list travels as an environment variable naming the child's
// descriptor numbers.
const (
	// passFDsEnv: the published ports' guest ends (runtime/net);
	// init donates them to the guest at 3, 4, ...
	passFDsEnv = "GVX_PASS_FDS"
	// volumeFDsEnv: the volume files openVolumes opened, in mount order;
	// init binds each at volumeBindPath (bindVolumes).
	volumeFDsEnv = "GVX_VOLUME_FDS"
)

// inherit appends files to cmd's ExtraFiles and names their numbers in
// the child in env. cmd.Env must be set.
func inherit(cmd *exec.Cmd, env string, files []*os.File) {
	if len(files) == 0 {
		return
	}
	var fds []string
	for i := range files {
		fds = append(fds, strconv.Itoa(3+len(cmd.ExtraFiles)+i))
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, files...)
	cmd.Env = append(cmd.Env, env+"="+strings.Join(fds, ","))
}

// closeInheritedOnExec marks every descriptor from 3 up close-on-exec: a
// process of the tree passes on only what it names in ExtraFiles, never
// what it inherited (the state lock, the sync pipe, the NAT socket).
func closeInheritedOnExec() {
	_ = unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
}

// inherited returns the files env names (and unsets it).
func inherited(env string) ([]*os.File, error) {
	v := os.Getenv(env)
	os.Unsetenv(env)
	var files []*os.File
	for _, f := range strings.Split(v, ",") {
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 3 {
			return nil, fmt.Errorf("%s=%q: bad descriptor", env, v)
		}
		files = append(files, os.NewFile(uintptr(n), env))
	}
	return files, nil
}

// volumeBindPath is where init binds the episode's i-th volume file: an
// empty file in the private state directory, covered by a bind mount of
// the opened file in init's mount namespace only.
func volumeBindPath(state string, i int) string {
	return filepath.Join(state, "volumes", "v"+strconv.Itoa(i))
}

// volumePathsEnv lists the volume files' paths (JSON), for bindVolumes.
const volumePathsEnv = "GVX_VOLUME_PATHS"

// bindVolumes binds each inherited volume file over its volumeBindPath, in
// this process's (init's) private mount namespace. A mount can only be
// made from a path of this namespace, so init looks the path up once more
// (O_PATH|O_NOFOLLOW), checks that it is the very file the host side opened
// and locked (same device and inode), and binds that descriptor through
// /proc/self/fd: a file swapped in between is refused, never mounted. The
// descriptors are closed afterwards (the host side keeps the lock).
func bindVolumes(state string, files []*os.File, paths []string) error {
	if len(paths) != len(files) {
		return fmt.Errorf("%d volume files, %d paths", len(files), len(paths))
	}
	for i, f := range files {
		err := bindVolume(f, paths[i], volumeBindPath(state, i))
		f.Close()
		if err != nil {
			return fmt.Errorf("volume %s: %w", paths[i], err)
		}
	}
	return nil
}

func bindVolume(f *os.File, path, dst string) error {
	var want, got unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &want); err != nil {
		return err
	}
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &got); err != nil {
		return err
	}
	if got.Dev != want.Dev || got.Ino != want.Ino {
		return fmt.Errorf("the file was replaced after it was opened: refusing it")
	}
	return unix.Mount("/proc/self/fd/"+strconv.Itoa(fd), dst, "", unix.MS_BIND, "")
}
