package gvx_test

import (
	"bufio"
	"bytes"
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/pkg/gvx"
)

// posixAllowed lists the steps of internal/posixcheck whose answer on a
// volume inside an episode differs from the kernel's ext4, and why that is
// acceptable. Every other difference fails TestPOSIXConformance, and so
// does an entry whose answer changed (so the list shrinks as gVisor or the
// volume improve). Each step maps to the answer the episode gives ("none":
// the step does not run there). tmpfsToo claims the difference is
// gVisor's own, not the volume's: the test checks that the episode's tmpfs
// answers the same. docs/ext4lite.md ("POSIX conformance") lists them.
var posixAllowed = []struct {
	why      string
	tmpfsToo bool
	steps    map[string]string
}{
	// gVisor's own (its VFS or syscall layer, on every filesystem).
	{"gVisor moves one link of a file over another link of the same file, where rename(2) does nothing; the volume does the same so that it holds what the guest saw (TestRenameOverOtherLinkOfSameInode)", true,
		map[string]string{"rename_file.same_inode_names": "ENOENT,ok"}},
	{"gVisor resolves a path under a regular file as ENOENT for rename's target, Linux says ENOTDIR", true,
		map[string]string{"rename_file.into_file": "ENOENT"}},
	{"gVisor's renameat2 has no RENAME_WHITEOUT; its overlay makes whiteouts with mknod 0:0, which the volume stores (mknod.whiteout)", true,
		map[string]string{"rename_flags.whiteout": "EINVAL", "rename_flags.whiteout_left": "ok:100000:0"}},
	{"gVisor has no O_TMPFILE here (EOPNOTSUPP); callers such as Python's tempfile fall back to create and unlink, which works (unlinked.*)", true,
		map[string]string{"tmpfile.open": "ENOTSUP", "tmpfile.nlink": "none", "tmpfile.invisible": "none", "tmpfile.linkat": "none", "tmpfile.named": "none"}},
	{"gVisor does not change a file's ctime when a name is linked or unlinked, an xattr set or removed, or on chown(-1, -1)", true,
		map[string]string{"link.link_times": "-", "link.unlink_times": "-", "chown.noop_times": "-", "xattr.set_times": "-", "xattr.remove_times": "-",
			"times.setxattr": "file=- dir=-", "times.removexattr": "file=- dir=-", "times.link": "file=- dir=mc", "times.unlink_other_name": "file=- dir=mc"}},
	{"gVisor does not change mtime on an fallocate inside the file or a write through a shared mapping", true,
		map[string]string{"times.fallocate_inside": "file=- dir=-", "times.mmap_write": "file=- dir=-"}},
	{"gVisor's setuid/setgid clearing: chown(-1, -1) keeps them (Linux clears them on any chown of a non-directory), a write by root clears them (Linux keeps them for CAP_FSETID), and a write by others keeps setgid without group-exec (Linux 6 clears it)", true,
		map[string]string{"chown.noop_clears_6755": "0106755", "chown.noop_clears_6745": "0106745", "chown.noop_clears_4700": "0104700",
			"suid_write.root_write": "0100777", "suid_write.after_sgid_noexec": "0102767"}},
	{"gVisor's stat of a time before 1970 wraps its nanoseconds (-1.000000005 reads as 0.3294967301)", true,
		map[string]string{"utimens.pre_1970_back": "0.3294967301,-100000"}},
	{"gVisor reports st_blocks as the size over 512, holes included (gofer's statTo, tmpfs)", true,
		map[string]string{"sparse.blocks_sparse": "false", "sparse.blocks_after_grow": "false"}},
	{"gVisor's fallocate(2) takes mode 0 only: KEEP_SIZE, PUNCH_HOLE, ZERO_RANGE, COLLAPSE_RANGE and INSERT_RANGE are EOPNOTSUPP before any filesystem sees them", true,
		map[string]string{"fallocate.keep_size": "ENOTSUP", "fallocate.keep_size_blocks_grew": "false", "fallocate.punch_hole": "ENOTSUP",
			"fallocate.punched_read": `"aaa"`, "fallocate.punch_unaligned": "ENOTSUP", "fallocate.punch_unaligned_read": `"aaaaaaaaaaaa"`,
			"fallocate.zero_range": "ENOTSUP", "fallocate.zeroed_read": `"aaaaaa"`, "fallocate.zero_range_grow": "ENOTSUP",
			"fallocate.zero_range_grow_size": "32768", "fallocate.collapse": "ENOTSUP", "fallocate.insert": "ENOTSUP"}},
	{"gVisor's lseek does not bound an offset by the filesystem's largest file", true,
		map[string]string{"large.seek_past_max": "17592186040321"}},
	{"gVisor answers mknod(S_IFDIR) with EINVAL, Linux with EPERM", true,
		map[string]string{"mknod.dir_type": "EINVAL"}},
	{"gVisor's F_GETLK of a free range sets l_len to 0, Linux leaves the caller's", true,
		map[string]string{"fcntl_lock.posix_after_close": "setlk=ok getlk=ok type=2 start=0 len=0 pid=other setlk_free=ok"}},

	// gVisor's gofer client and lisafs, which serve every volume: decided
	// in the Sentry or in lisafs's own handlers before the volume server
	// is asked.
	{"the gofer client shows a link count of 0 as 1 (statTo: \"the remote filesystem doesn't support link count\"); the volume says 0", false,
		map[string]string{"unlinked.fstat_nlink": "1", "rename_file.replaced_nlink": "1", "dirs.removed_nlink": "1"}},
	{"lisafs's FGetXattr, FSetXattr and Getdents64 handlers answer EINVAL for a deleted node (there is no *OnDeleted option for them); read, write, ftruncate, fallocate, fstat and reopen of an open unlinked file work", false,
		map[string]string{"unlinked.fsetxattr": "EINVAL", "unlinked.fgetxattr": `EINVAL:""`, "dirs.removed_getdents": "EINVAL:0"}},
	{"the gofer client refuses trusted.* xattrs on every gofer mount (checkXattrPermissions: the gofer could not set them on a host file); user.* work", false,
		map[string]string{"xattr.trusted": "ENOTSUP", "xattr.trusted_get": "ENOTSUP", "xattr.trusted_on_symlink": "ENOTSUP", "xattr.trusted_on_symlink_get": "ENOTSUP",
			"xattr.trusted_opaque_dir": "ENOTSUP", "xattr.dir_get": "ENOTSUP", "xattr.after_rename_link": "ENOTSUP", "xattr.list": "*", "xattr.list_size": "ok:285",
			"xattr.nobody_trusted_hidden": "*"}},
	{"the gofer client refuses to open a FIFO on a gofer mount (runsc's --host-fifo is none, and with it lisafs would want a host FD the volume cannot give for an inode in its image); mkfifo, stat, rename and unlink of one work", false,
		map[string]string{"mknod.fifo_open_r": "EPERM", "mknod.fifo_open_w": "EPERM", "mknod.fifo_data": `EBADF:""`}},
	{"the gofer client reports V9FS_MAGIC as f_type for every gofer mount (StatFSAt); the volume answers EXT4_SUPER_MAGIC", false,
		map[string]string{"statfs.type": "0x1021997"}},
	{"the gofer client's SEEK_DATA and SEEK_HOLE take the whole file as data (lisafs has no message for a file's extents), which lseek(2) allows", false,
		map[string]string{"sparse.seek_data_0": "0", "sparse.seek_hole_0": "1052672", "sparse.tail_hole": "1052672"}},
	{"the gofer client's pwrite stamps mtime and ctime before it looks at the length, so a write of 0 bytes changes them (and a file made by os.WriteFile with no data has atime older than mtime)", false,
		map[string]string{"times.write_0": "file=mc dir=-", "times.new_times_equal": "a=m:false m=c:true"}},
}

// posixDumpAllowed lists the entries of posixcheck -dump whose line may
// differ between the guest's view at the end of the episode and the
// kernel's mount of the volume afterwards: which field, and why. They may also agree
// (a cache may have been refreshed), so an entry that agrees is no error.
var posixDumpAllowed = map[string]struct{ field, why string }{
	`"bigdir"`: {"size", "the Sentry keeps the directory's size from when it was made (a block); ext4lite lays the 3,000-entry directory out when it syncs, after which a new episode sees the kernel's size (the second dump)"},
}

// TestPOSIXConformance runs the project's POSIX conformance suite
// (internal/posixcheck) on a kernel ext4 mount of an ext4lite-made image
// and on an ext4lite volume inside an episode (rungv's lisafs server behind
// gVisor's gofer client, --file-access-mounts=exclusive), and fails on any
// difference that posixAllowed does not explain. The same run on a tmpfs
// inside the episode is printed next to each difference: a difference
// that tmpfs shows too is gVisor's, not the volume's. Both images are
// e2fsck-clean afterwards.
func TestPOSIXConformance(t *testing.T) {
	need(t)
	if os.Getuid() != 0 {
		t.Skip("needs root: loop-mounts an ext4 image for the kernel's answers, and the suite checks chown, devices and trusted.* xattrs")
	}
	for _, tool := range []string{"mount", "umount", "e2fsck"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	bin := buildPosixcheck(t)
	tmp := t.TempDir()
	// The suite runs steps as nobody: the mount point's parents must let it through.
	for _, d := range []string{tmp, filepath.Dir(tmp)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// (a) the kernel's ext4, on an image ext4lite made (the volume's own
	// format and geometry).
	kimg := filepath.Join(tmp, "kernel.ext4")
	mkVolume(t, kimg)
	mnt := filepath.Join(tmp, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "loop", kimg, mnt).CombinedOutput(); err != nil {
		t.Skipf("no loop mount here (%v: %s)", err, out)
	}
	kout, kerr := exec.Command(filepath.Join(bin, "posixcheck"), filepath.Join(mnt, "t")).Output()
	if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
		t.Fatalf("umount %s: %v %s", mnt, err, out)
	}
	if kerr != nil {
		t.Fatalf("posixcheck on the kernel's ext4: %v\n%s", kerr, kout)
	}
	e2fsck(t, kimg)

	// (b) an ext4lite volume in an episode, and (c) the episode's tmpfs.
	vol := filepath.Join(tmp, "v.ext4")
	mkVolume(t, vol)
	var out, errb bytes.Buffer
	ctx := context.Background()
	sb := newSandbox(t, ctx, gvx.Config{
		NetworkMode: gvx.NetModeNone,
		Entrypoint:  []string{"sh", "-c"}, EntrypointSet: true,
		Cmd: []string{`/posix/posixcheck /data/t || echo "end exit $?"; echo ==tmpfs; /posix/posixcheck /ref/t || echo "end exit $?"; echo ==dump; /posix/posixcheck -dump /data/t`},
		Mounts: []gvx.Mount{
			{Kind: gvx.MountVolume, ImagePath: vol, GuestPath: "/data"},
			{Kind: gvx.MountBind, ImagePath: bin, GuestPath: "/posix", ReadOnly: true},
			{Kind: gvx.MountTmpfs, GuestPath: "/ref"},
		},
		Stdout: &out,
		Stderr: &errb,
	})
	if code, err := sb.Run(ctx); err != nil || code != 0 {
		t.Fatalf("exit %d, %v; stderr %s", code, err, errb.String())
	}
	sb.Close()
	e2fsck(t, vol)
	vout, rest, ok1 := strings.Cut(out.String(), "==tmpfs\n")
	tout, guestDump, ok2 := strings.Cut(rest, "==dump\n")
	if !ok1 || !ok2 {
		t.Fatalf("episode output without its tmpfs and dump parts:\n%s\nstderr %s", out.String(), errb.String())
	}
	// What the guest saw is what the volume holds: the kernel's view of the
	// volume file afterwards lists the same entries, modes, owners, sizes,
	// links, devices, mtimes, xattrs and data (the Sentry's caches answered
	// the guest; they would hide a server that lost any of these).
	if out, err := exec.Command("mount", "-o", "loop,ro", vol, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount the volume: %v %s", err, out)
	}
	hostDump, derr := exec.Command(filepath.Join(bin, "posixcheck"), "-dump", filepath.Join(mnt, "t")).Output()
	if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
		t.Fatalf("umount %s: %v %s", mnt, err, out)
	}
	if derr != nil {
		t.Fatalf("posixcheck -dump of the volume: %v", derr)
	}
	if dir := os.Getenv("GVX_POSIX_OUT"); dir != "" {
		os.WriteFile(filepath.Join(dir, "guest-dump.txt"), []byte(guestDump), 0o644)
		os.WriteFile(filepath.Join(dir, "volume-dump.txt"), hostDump, 0o644)
	}
	guestRecent, guestTimes := recentMtimes(guestDump)
	hostRecent, hostTimes := recentMtimes(string(hostDump))
	if d := dumpDiff(guestRecent, hostRecent, posixDumpAllowed); d != "" {
		t.Errorf("the volume holds other than the guest saw (- guest, + kernel mount of the volume afterwards; mtimes after 2020 compared below):\n%s", d)
	}
	for name, g := range guestTimes {
		if h, ok := hostTimes[name]; ok && math.Abs(g-h) > 10 {
			t.Errorf("%s: the guest saw mtime %.3f, the volume holds %.3f: more than 10 s apart", name, g, h)
		}
	}
	// A new episode, with nothing cached, sees through the volume server
	// exactly what the kernel reads from the same file: every stat field,
	// time, xattr and byte as ext4lite answers them.
	out.Reset()
	errb.Reset()
	sb2 := newSandbox(t, ctx, gvx.Config{
		NetworkMode: gvx.NetModeNone,
		Entrypoint:  []string{"/posix/posixcheck"}, EntrypointSet: true,
		Cmd: []string{"-dump", "/data/t"},
		Mounts: []gvx.Mount{
			{Kind: gvx.MountVolume, ImagePath: vol, GuestPath: "/data", ReadOnly: true},
			{Kind: gvx.MountBind, ImagePath: bin, GuestPath: "/posix", ReadOnly: true},
		},
		Stdout: &out,
		Stderr: &errb,
	})
	if code, err := sb2.Run(ctx); err != nil || code != 0 {
		t.Fatalf("second episode: exit %d, %v; stderr %s", code, err, errb.String())
	}
	sb2.Close()
	if d := dumpDiff(out.String(), string(hostDump), nil); d != "" {
		t.Errorf("a new episode sees the volume other than the kernel does (- episode, + kernel):\n%s", d)
	}
	if dir := os.Getenv("GVX_POSIX_OUT"); dir != "" { // keep the three runs to read or diff
		os.WriteFile(filepath.Join(dir, "kernel.txt"), kout, 0o644)
		os.WriteFile(filepath.Join(dir, "volume.txt"), []byte(vout), 0o644)
		os.WriteFile(filepath.Join(dir, "tmpfs.txt"), []byte(tout), 0o644)
	}

	kernel, korder := parsePosix(string(kout))
	volume, vorder := parsePosix(vout)
	tmpfs, _ := parsePosix(tout)
	if kernel["end"] != "ok" || volume["end"] != "ok" {
		t.Fatalf("a run did not finish: kernel %q, volume %q; stderr %s", kernel["end"], volume["end"], errb.String())
	}
	allowed := map[string]string{}
	for _, a := range posixAllowed {
		for step, got := range a.steps {
			allowed[step] = got
			if a.tmpfsToo && tmpfs[step] != volume[step] {
				t.Errorf("%s is allow-listed as gVisor's own (%s), but the episode's tmpfs answers %q and the volume %q", step, a.why, tmpfs[step], volume[step])
			}
		}
	}
	seen := map[string]bool{}
	for _, step := range append(korder, vorder...) {
		if seen[step] {
			continue
		}
		seen[step] = true
		k, kok := kernel[step]
		v, vok := volume[step]
		if !vok {
			v = "none"
		}
		if kok && vok && k == v {
			if _, ok := allowed[step]; ok {
				t.Errorf("%s is allow-listed but the volume now answers as the kernel (%s): remove the entry", step, k)
			}
			continue
		}
		if got, ok := allowed[step]; ok && (got == "*" || got == v) {
			continue
		}
		if !kok {
			k = "none"
		}
		t.Errorf("%s: kernel ext4 %s, volume %s (episode tmpfs %s)", step, k, v, tmpfs[step])
	}
}

// recentMtimes replaces every recent "mtime=S.N" of a dump (after 2020)
// by "mtime=recent" and returns those times, in seconds, by the line's
// first field (the entry's quoted name). The Sentry keeps the times of
// what it writes by its own clock and does not write them back (gofer's
// destroyDisconnected: "too expensive"); the volume stamps its own when
// the data arrives, microseconds to a flush later: the caller checks
// that the two are within seconds of each other. A time the guest set
// (utimensat: all of posixcheck's are before 2020 or after 2100) stays
// exact, to the nanosecond, and one lost outright still shows.
func recentMtimes(dump string) (string, map[string]float64) {
	times := map[string]float64{}
	lines := strings.Split(dump, "\n")
	for i, l := range lines {
		lines[i] = mtimeRe.ReplaceAllStringFunc(l, func(m string) string {
			v, err := strconv.ParseFloat(strings.TrimPrefix(m, "mtime="), 64)
			if err != nil || v < 1577836800 || v > 4102444800 {
				return m
			}
			name, _, _ := strings.Cut(l, " ")
			times[name] = v
			return "mtime=recent"
		})
	}
	return strings.Join(lines, "\n"), times
}

var mtimeRe = regexp.MustCompile(`mtime=-?[0-9]+\.[0-9]+`)

// dumpDiff lists the entries whose lines differ between two dumps ("-"
// for a, "+" for b), but in the field allow names for an entry.
func dumpDiff(a, b string, allow map[string]struct{ field, why string }) string {
	byPath := func(s string) map[string]string {
		m := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
			path, _, _ := strings.Cut(l, " ")
			m[path] = l
		}
		return m
	}
	ma, mb := byPath(a), byPath(b)
	paths := map[string]bool{}
	for p := range ma {
		paths[p] = true
	}
	for p := range mb {
		paths[p] = true
	}
	var d []string
	for p := range paths {
		la, lb := ma[p], mb[p]
		if a, ok := allow[p]; ok {
			field := regexp.MustCompile(" " + regexp.QuoteMeta(a.field) + "=[^ ]*")
			la, lb = field.ReplaceAllString(la, ""), field.ReplaceAllString(lb, "")
		}
		if la != lb {
			d = append(d, "- "+ma[p], "+ "+mb[p])
		}
	}
	sort.Slice(d, func(i, j int) bool { return d[i][2:] < d[j][2:] || d[i][2:] == d[j][2:] && d[i] < d[j] })
	return strings.Join(d, "\n")
}

// parsePosix reads posixcheck's "check.step value" lines.
func parsePosix(s string) (map[string]string, []string) {
	m := map[string]string{}
	var order []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		step, val, _ := strings.Cut(sc.Text(), " ")
		if _, dup := m[step]; !dup {
			order = append(order, step)
		}
		m[step] = val
	}
	return m, order
}

// buildPosixcheck builds internal/posixcheck, static, into a directory
// that nobody can read and run (the suite re-runs itself as uid 65534).
func buildPosixcheck(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gvx-posixcheck-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "posixcheck"), "z.gfire.dev/gvx/internal/posixcheck")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build posixcheck: %v\n%s", err, out)
	}
	return dir
}

// mkVolume makes an empty 1 GiB ext4lite volume at p.
func mkVolume(t *testing.T, p string) {
	t.Helper()
	v, err := ext4lite.Create(p, 1<<30, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
}

// e2fsck fails the test unless e2fsck -fn finds p clean.
func e2fsck(t *testing.T, p string) {
	t.Helper()
	if b, err := exec.Command("e2fsck", "-fn", p).CombinedOutput(); err != nil {
		t.Errorf("e2fsck -fn %s: %v\n%s", p, err, b)
	}
}
