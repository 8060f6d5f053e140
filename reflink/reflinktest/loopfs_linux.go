package reflinktest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ImageSize is the size of the sparse image file behind each loop mount
// (XFS refuses filesystems under 300 MB).
const ImageSize = 512 << 20

// Mount makes a kind filesystem — "xfs" (with reflink=1), "xfs-noreflink"
// (reflink=0), "btrfs", "ext4" on a sparse image file under t.TempDir(), or
// "tmpfs" — mounts it and returns the mount point.
func Mount(t testing.TB, kind string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("mounting a loop %s needs root (CI runs these as root)", kind)
	}
	var mkfs []string
	switch kind {
	case "xfs":
		mkfs = []string{"mkfs.xfs", "-q", "-m", "reflink=1"}
	case "xfs-noreflink":
		mkfs = []string{"mkfs.xfs", "-q", "-m", "reflink=0"}
	case "btrfs":
		mkfs = []string{"mkfs.btrfs", "-q"}
	case "ext4":
		mkfs = []string{"mkfs.ext4", "-q", "-F"}
	case "tmpfs":
	default:
		t.Fatalf("reflinktest: unknown filesystem %q", kind)
	}
	tools := []string{"mount", "umount", "losetup"}
	if mkfs != nil {
		tools = append(tools, mkfs[0])
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (Debian: xfsprogs, btrfs-progs, e2fsprogs, mount): %v", tool, err)
		}
	}
	fsType, _, _ := strings.Cut(kind, "-")
	base := t.TempDir()
	mnt := filepath.Join(base, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	var args []string
	if kind == "tmpfs" {
		args = []string{"-t", "tmpfs", "-o", "size=256m", "tmpfs", mnt}
	} else {
		img := filepath.Join(base, fsType+".img")
		if err := os.WriteFile(img, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(img, ImageSize); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(mkfs[0], append(mkfs[1:], img)...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(mkfs, " "), err, out)
		}
		args = []string{"-o", "loop,nosuid,nodev", img, mnt}
		t.Cleanup(func() {
			// mount -o loop sets autoclear; detach anything left anyway.
			out, _ := exec.Command("losetup", "-j", img).Output()
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if dev, _, ok := strings.Cut(line, ":"); ok {
					exec.Command("losetup", "-d", dev).Run()
				}
			}
		})
	}
	if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
		// mount loads the module if there is one: a kernel that still does
		// not list the filesystem cannot run the test; any other failure is
		// the test's.
		if fss, _ := os.ReadFile("/proc/filesystems"); !strings.Contains(string(fss), "\t"+fsType+"\n") {
			t.Skipf("the kernel has no %s (not in /proc/filesystems): %v: %s", kind, err, out)
		}
		t.Fatalf("mount %s: %v: %s", strings.Join(args, " "), err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			// A file the test left open keeps the mount busy: report it,
			// and detach lazily so nothing outlives the test process.
			t.Errorf("umount %s: %v: %s", mnt, err, out)
			exec.Command("umount", "-l", mnt).Run()
		}
	})
	return mnt
}
