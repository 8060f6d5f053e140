package runtime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Pruning the episode's mount namespace.
//
// The episode's init (and through it runsc run, the gofer and the
// sandbox, which start from its namespace) gets a copy of the host's
// mount tree when it starts (CLONE_NEWNS). A copy of a mount that is
// private on the host is not unmounted when the host unmounts it: the
// episode kept it mounted, and its device busy (a loop device of an XFS
// the host had unmounted stayed attached), until it ended; and every
// process of the episode could see every host mount. So init, right after
// it made the copy a slave, moves to a new root that holds only what the
// episode needs (episodeMountKeep: its state directory with the bundle,
// runsc's root and the volumes' binds, the image files and bind-mount
// sources its spec names, runsc's debug-log directory, and /proc, /dev and
// /sys), each bound at its own path, and detaches the old root. What the
// host mounts afterwards under a kept path reaches the copy only if it is
// shared on the host, and its unmount then reaches the copy too (a slave:
// TestHostUnmountNotPinned).

// pruneMounts replaces this process's root, a copy of the host's mount
// tree, with a tree of only the paths in keep (each bound, with what is
// mounted under it, at its own path, and at its real path if a symlink is
// on the way) over a small tmpfs, and detaches the old root: every other
// host mount is gone from the namespace. Binding the keep paths and
// detaching the whole old root works where the copy's mounts are locked
// (a user namespace of the caller's: they cannot be unmounted one by
// one). mnt is an empty directory of the caller's for the new root
// (under a kept path); its copy inside the new tree is detached too.
func pruneMounts(keep []string, mnt string) error {
	if err := unix.Mount("gvx-root", mnt, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m"); err != nil {
		return fmt.Errorf("tmpfs at %s: %w", mnt, err)
	}
	for _, k := range keepRoots(keep) {
		st, err := os.Stat(k)
		if err != nil {
			continue // nothing there to keep
		}
		dst := filepath.Join(mnt, k)
		if st.IsDir() {
			err = os.MkdirAll(dst, 0o755)
		} else if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
			var f *os.File
			if f, err = os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
				f.Close()
			}
		}
		if err != nil {
			return fmt.Errorf("new root: %w", err)
		}
		if err := unix.Mount(k, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", k, err)
		}
	}
	if err := os.Chdir(mnt); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root %s: %w", mnt, err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the host's mounts: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	// The new root's own copy, inside the bound state directory.
	if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("detach %s: %w", mnt, err)
	}
	return nil
}

// keepRoots is keep, each with its real path too (symlinks resolved),
// without paths under another one, in order.
func keepRoots(keep []string) []string {
	var all []string
	for _, k := range keep {
		all = append(all, k)
		if r, err := filepath.EvalSymlinks(k); err == nil && r != k {
			all = append(all, r)
		}
	}
	sort.Strings(all)
	var out []string
	for _, k := range all {
		if len(out) > 0 && pathUnder(k, out[len(out)-1]) {
			continue
		}
		out = append(out, k)
	}
	return out
}

// pathUnder reports whether p is dir or under it (both clean and
// absolute).
func pathUnder(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// mountKeep is what the episode's init keeps of the host's mounts, from
// the plan: its state directory (bundle, runsc's root, the volumes'
// binds), runsc's debug-log and profile directories, and the host paths
// of the OCI spec the sandbox boots (its rootfs, bind-mount sources, and
// the image files its gVisor annotations name). Init adds what only it
// knows (keepForInit).
func (p *plan) mountKeep() []string {
	// runsc creates the Sentry's (and gofer's) profiles by name in the
	// profile directory at the episode's end.
	keep := []string{p.state, p.bundle, p.runscRoot(), p.host.DebugLogDir, p.host.ProfileDir}
	if s := p.oci; s != nil {
		if s.Root != nil {
			keep = append(keep, s.Root.Path)
		}
		for _, m := range s.Mounts {
			if filepath.IsAbs(m.Source) {
				keep = append(keep, m.Source)
			}
		}
		for k, v := range s.Annotations {
			if strings.HasSuffix(k, ".source") && filepath.IsAbs(v) {
				keep = append(keep, v)
			}
		}
	}
	return cleanKeep(keep)
}

// keepForInit is the plan's keep list (nsEpisode.Keep) with what init
// itself needs: /proc, /dev, /sys, and rungv's own binary — runsc starts
// the sandbox and the gofer by its path (os.Executable), and a path
// outside the other keeps (a build-golden's --rungv in a directory of its
// own) was gone.
func keepForInit(ep nsEpisode) []string {
	keep := append([]string{ep.State, ep.Bundle, ep.Root, "/proc", "/dev", "/sys"}, ep.Keep...)
	if exe, err := os.Executable(); err == nil {
		keep = append(keep, exe)
	}
	return cleanKeep(keep)
}

// cleanKeep drops empty paths and makes the others absolute and clean.
func cleanKeep(keep []string) []string {
	var out []string
	for _, k := range keep {
		if k == "" {
			continue
		}
		if !filepath.IsAbs(k) {
			k, _ = filepath.Abs(k)
		}
		out = append(out, filepath.Clean(k))
	}
	return out
}
