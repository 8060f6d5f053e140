package dindtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Build is Bookworm.Build.
func Build(ctx context.Context, dir string) (string, error) { return Bookworm.Build(ctx, dir) }

// Build returns the path of an OCI image layout holding flavour f,
// building it if the cache directory dir ("" means CacheDir()) has no
// entry for the current key. Building needs root, debootstrap and the
// Debian mirror (see IsUnavailable); it takes a few minutes and ~700 MB.
// A second call returns at once. Callers must not modify the layout.
func (f Flavour) Build(ctx context.Context, dir string) (string, error) {
	if dir == "" {
		dir = CacheDir()
	}
	mirror, err := Mirror(mirrorSuite)
	if err != nil {
		return "", err
	}
	final := filepath.Join(dir, f.entry(f.Key(mirror)))
	if done(final) {
		return final, nil
	}
	if os.Geteuid() != 0 {
		return "", ErrNotRoot
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return "", ErrNoDebootstrap
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("dindtest: %w", err)
	}
	unlock, err := lock(ctx, filepath.Join(dir, f.entry(f.Key(mirror))+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if done(final) { // built by another process while we waited
		return final, nil
	}
	work, err := os.MkdirTemp(dir, ".dind-build-")
	if err != nil {
		return "", fmt.Errorf("dindtest: %w", err)
	}
	defer removeBuild(work)
	rootfs := filepath.Join(work, "rootfs")
	if err := runScript(ctx, work, rootfs, mirror, f); err != nil {
		return "", err
	}
	layoutDir := filepath.Join(work, "layout")
	if err := writeLayout(rootfs, layoutDir); err != nil {
		return "", err
	}
	if err := syncDir(layoutDir); err != nil {
		return "", err
	}
	if err := os.Rename(layoutDir, final); err != nil {
		return "", fmt.Errorf("dindtest: publish: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return "", err
	}
	return final, nil
}

// done reports whether a published entry exists (entries appear by
// rename only once complete).
func done(layoutDir string) bool {
	st, err := os.Stat(filepath.Join(layoutDir, "index.json"))
	return err == nil && st.Mode().IsRegular()
}

// runScript runs the embedded rootfs script, logging into work/build.log.
func runScript(ctx context.Context, work, rootfs, mirror string, f Flavour) error {
	script := filepath.Join(work, "rootfs.sh")
	if err := os.WriteFile(script, []byte(rootfsScript), 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(work, "build.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{script, rootfs, mirror, f.Suite}, f.Packages...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	// debootstrap, chroot and apt run as children: a cancelled context
	// stops the whole group (the script's trap unmounts /proc).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	runErr := cmd.Run()
	if runErr == nil {
		return nil
	}
	log, _ := os.ReadFile(logPath)
	tail := lastLines(log, 15)
	if ctx.Err() != nil {
		return fmt.Errorf("dindtest: build cancelled: %w", ctx.Err())
	}
	if unreachable(log) {
		return fmt.Errorf("%w (%s): %s", ErrNoNetwork, mirror, tail)
	}
	return fmt.Errorf("dindtest: building the rootfs from %s: %v:\n%s", mirror, runErr, tail)
}

// unreachable recognises debootstrap's and apt's messages for a mirror
// that cannot be reached.
func unreachable(log []byte) bool {
	for _, s := range []string{
		"Failed getting release file", "Temporary failure resolving", "Could not resolve",
		"Network is unreachable", "Connection refused", "Connection timed out",
		"No route to host", "Couldn't download", "Unable to fetch some archives",
	} {
		if bytes.Contains(log, []byte(s)) {
			return true
		}
	}
	return false
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// removeBuild removes a build directory, first detaching anything the
// script may have left mounted in it (it unmounts /proc on exit, but a
// SIGKILL skips traps): RemoveAll must never walk into a live /proc.
func removeBuild(work string) {
	for _, m := range []string{"rootfs/proc", "rootfs/sys", "rootfs/dev/pts", "rootfs/dev"} {
		_ = unix.Unmount(filepath.Join(work, m), unix.MNT_DETACH)
	}
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil && bytes.Contains(mi, []byte(work+"/")) {
		return // still mounted: leave it rather than delete through a mount
	}
	_ = os.RemoveAll(work)
}

// lock takes an exclusive flock on path, polling so that ctx can stop the
// wait.
func lock(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dindtest: %w", err)
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("dindtest: lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// syncDir fsyncs a directory and every file and directory under it.
func syncDir(dir string) error {
	return filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() && !fi.IsDir() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Sync()
	})
}
