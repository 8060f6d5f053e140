package dindtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/internal/durable"
)

// Build is Bookworm.Build.
func Build(ctx context.Context, dir string) (string, error) { return Bookworm.Build(ctx, dir) }

// Build returns the path of an OCI image layout holding flavour f,
// building it if the cache directory dir ("" means CacheDir()) has no
// entry for the current key. Building needs root, debootstrap and the
// Debian mirror (see IsUnavailable); it takes a few minutes and ~700 MB.
// A second call returns at once. Callers must not modify the layout (its
// files are read-only; use CopyLayout for a copy to edit).
//
// dir must be the caller's own (CheckCacheDir), and the entry is verified
// (VerifyLayout) every time before it is returned: a damaged entry is
// removed and built again, or, when this machine cannot build it, reported
// with the entry to remove (ErrDamaged).
func (f Flavour) Build(ctx context.Context, dir string) (string, error) {
	if dir == "" {
		dir = CacheDir()
	}
	mirror, err := Mirror(mirrorSuite)
	if err != nil {
		return "", err
	}
	return cachedLayout(ctx, dir, builder{
		entry: f.entry(f.Key(mirror)),
		check: canBuild,
		build: func(ctx context.Context, work, layoutDir string) error {
			rootfs := filepath.Join(work, "rootfs")
			if err := runScript(ctx, work, rootfs, mirror, f); err != nil {
				return err
			}
			return writeLayout(rootfs, layoutDir)
		},
	})
}

// canBuild says whether this machine can run the build (nil) or why not.
func canBuild() error {
	if os.Geteuid() != 0 {
		return ErrNotRoot
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return ErrNoDebootstrap
	}
	return nil
}

// builder makes one cache entry.
type builder struct {
	// entry is the entry's directory name in the cache.
	entry string
	// check returns nil when build may run, or why it cannot
	// (an IsUnavailable error).
	check func() error
	// build writes the OCI layout into layoutDir, using work (a fresh
	// directory in the cache) for anything else.
	build func(ctx context.Context, work, layoutDir string) error
}

// cachedLayout returns the verified cache entry b.entry in dir, building
// it (or building it again when damaged) under the entry's lock.
func cachedLayout(ctx context.Context, dir string, b builder) (string, error) {
	final := filepath.Join(dir, b.entry)
	marker := filepath.Join(dir, markerName(b.entry))
	exists := true
	if err := CheckCacheDir(dir); errors.Is(err, fs.ErrNotExist) {
		exists = false
	} else if err != nil {
		return "", err
	}
	var bad error // why the entry present is unusable
	if exists && present(final) {
		if bad = VerifyLayout(final, marker); bad == nil {
			return final, nil
		}
	}
	if err := b.check(); err != nil {
		if bad != nil {
			return "", bad // loud: a skip would hide a broken cache
		}
		return "", err
	}
	if !exists {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return "", fmt.Errorf("dindtest: %w", err)
		}
		// Mkdir, not MkdirAll: if someone made dir since the check,
		// the check below sees whose it is.
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("dindtest: %w", err)
		}
		if err := CheckCacheDir(dir); err != nil {
			return "", err
		}
	}
	unlock, err := lock(ctx, filepath.Join(dir, b.entry+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if present(final) { // built (or repaired) by another process while we waited?
		bad = VerifyLayout(final, marker)
		if bad == nil {
			return final, nil
		}
		// Damaged: the entry is ours (dir is), so remove it and build
		// it again (minutes: say why).
		fmt.Fprintf(os.Stderr, "dindtest: building %s again, it is damaged: %v\n", final, bad)
		os.Remove(marker)
		if err := os.RemoveAll(final); err != nil {
			return "", fmt.Errorf("%w (removing it: %v)", bad, err)
		}
	}
	work, err := os.MkdirTemp(dir, ".dind-build-")
	if err != nil {
		return "", fmt.Errorf("dindtest: %w", err)
	}
	defer removeBuild(work)
	layoutDir := filepath.Join(work, "layout")
	if err := b.build(ctx, work, layoutDir); err != nil {
		return "", err
	}
	if err := sealLayout(layoutDir); err != nil {
		return "", err
	}
	if err := syncDir(layoutDir); err != nil {
		return "", err
	}
	// Publish fsyncs dir for the rename, not the cache's whole tree:
	// another flavour's build may be under way in dir, its rootfs with
	// /proc mounted (fsync there is EINVAL: a TestPoolDocker failed so
	// while sid was being built).
	if err := durable.Publish(layoutDir, final, durable.Options{Synced: true}); err != nil {
		return "", fmt.Errorf("dindtest: %w", err)
	}
	// Hash once now, so that later calls find the marker.
	if err := VerifyLayout(final, marker); err != nil {
		return "", err
	}
	return final, nil
}

// present reports whether an entry exists (entries appear by rename only
// once complete), whatever state it is in.
func present(layoutDir string) bool {
	_, err := os.Lstat(layoutDir)
	return err == nil
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
