// Command taskimg makes the two local images of bench/task.sh as
// docker-archive tarballs (`docker load`, `gvx-vol build-golden --load`):
//
//	taskbench/pybase:1  Debian bookworm minbase + python3 python3-pytest python3-redis
//	taskbench/redis:1   Debian bookworm minbase + redis-server
//
// Each is debootstrapped from the host's Debian mirror, found exactly as
// package image/dindtest finds it (dindtest.Mirror: $GVX_DEBIAN_MIRROR, else
// the host's apt sources), with no registry anywhere. The tarballs are
// cached in the caller's own cache directory ($GVX_BENCH_CACHE, default
// /var/tmp/gvx-bench-cache-UID, as bench/sidroot.sh: refused unless it is
// the caller's and writable by no one else) under a key of mirror, suite,
// packages and this builder's version, each beside the sha256 it had when
// it was made; every use copies it into OUTDIR and checks that digest on
// the way (a mismatch is an error naming the entry to remove).
//
//	go run ./bench/taskimg OUTDIR    → OUTDIR/pybase.tar, OUTDIR/redis.tar
//	go run ./bench/taskimg -cli LAYOUT DIR   → dindtest.ExtractCLI(LAYOUT, DIR):
//	                                 the dind image's docker CLI and plugins
//	                                 (Compose) for the host side
//
// Needs root (debootstrap, chroot) for the first build, ~2 min each here.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/image/dindtest"
	"z.gfire.dev/gvx/internal/filehash"
)

// version is part of every key: change it when the build changes.
const version = "taskimg-1"

const suite = "bookworm"

type spec struct {
	file, tag string
	packages  []string
	cmd       []string
}

var specs = []spec{
	{"pybase.tar", "taskbench/pybase:1", []string{"python3", "python3-pytest", "python3-redis"}, []string{"python3"}},
	{"redis.tar", "taskbench/redis:1", []string{"redis-server"},
		[]string{"redis-server", "--bind", "0.0.0.0", "--protected-mode", "no", "--save", "", "--appendonly", "no"}},
}

// script installs PACKAGES into the debootstrapped ROOT with no service
// started (policy-rc.d), then drops apt's caches and logs.
const script = `set -eu
root=$1; shift
cleanup() { umount "$root/proc" 2>/dev/null || true; }
trap cleanup EXIT
mount -t proc proc "$root/proc"
cp /etc/resolv.conf "$root/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }
in_root apt-get -qq update
in_root apt-get -qq install -y --no-install-recommends "$@"
in_root apt-get -qq clean
rm -f "$root/usr/sbin/policy-rc.d"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/debconf/*-old \
	"$root"/var/log/*.log "$root"/var/log/apt/* "$root"/tmp/* "$root"/root/.cache
: >"$root/etc/resolv.conf"
: >"$root/etc/hostname"
`

func main() {
	if len(os.Args) == 4 && os.Args[1] == "-cli" {
		if _, err := dindtest.ExtractCLI(os.Args[2], os.Args[3]); err != nil {
			fmt.Fprintln(os.Stderr, "taskimg:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) != 2 || strings.HasPrefix(os.Args[1], "-") {
		fmt.Fprintln(os.Stderr, "usage: taskimg OUTDIR   (writes OUTDIR/pybase.tar and OUTDIR/redis.tar)\n       taskimg -cli LAYOUT DIR   (the docker CLI and plugins of a dind image)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "taskimg:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out string) error {
	cache, err := cacheDir()
	if err != nil {
		return err
	}
	mirror, err := dindtest.Mirror(suite)
	if err != nil {
		return err
	}
	for _, s := range specs {
		entry := filepath.Join(cache, strings.TrimSuffix(s.file, ".tar")+"-"+key(s, mirror))
		if err := ensure(ctx, entry, s, mirror); err != nil {
			return err
		}
		if err := copyVerified(entry, filepath.Join(out, s.file)); err != nil {
			return err
		}
	}
	return nil
}

func key(s spec, mirror string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%s\n%s\n%s\n%s\n", version, script, mirror, suite, runtime.GOARCH, strings.Join(s.packages, " "), strings.Join(s.cmd, "\x00"))
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// cacheDir is the caller's own cache directory, made 0700 if missing; one
// that is a symlink, another user's or writable by others is refused: its
// images run as root in the bench.
func cacheDir() (string, error) {
	d := os.Getenv("GVX_BENCH_CACHE")
	if d == "" {
		d = fmt.Sprintf("/var/tmp/gvx-bench-cache-%d", os.Getuid())
	}
	if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	var st unix.Stat_t
	if err := unix.Lstat(d, &st); err != nil {
		return "", err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Getuid() || st.Mode&0o022 != 0 {
		return "", fmt.Errorf("cache %s is not a directory of uid %d that only it can write (uid %d, mode %o): remove it, or set GVX_BENCH_CACHE to a directory of your own",
			d, os.Getuid(), st.Uid, st.Mode&0o7777)
	}
	return d, nil
}

// ensure builds entry.tar and entry.sha256 unless both exist.
func ensure(ctx context.Context, entry string, s spec, mirror string) error {
	if _, err := os.Stat(entry + ".sha256"); err == nil {
		return nil
	}
	lockf, err := os.OpenFile(entry+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lockf.Close()
	if err := unix.Flock(int(lockf.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", entry+".lock", err)
	}
	if _, err := os.Stat(entry + ".sha256"); err == nil {
		return nil // another builder finished while we waited
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s is not built yet and building it needs root (debootstrap)", entry)
	}
	work, err := os.MkdirTemp(filepath.Dir(entry), ".taskimg-")
	if err != nil {
		return err
	}
	defer func() {
		_ = unix.Unmount(filepath.Join(work, "root/proc"), unix.MNT_DETACH)
		if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(mi), work+"/") {
			return // still mounted: never delete through a mount
		}
		os.RemoveAll(work)
	}()
	root := filepath.Join(work, "root")
	logPath := entry + ".log"
	fmt.Fprintf(os.Stderr, "taskimg: building %s (%s) from %s; log %s\n", s.tag, strings.Join(s.packages, " "), mirror, logPath)
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	sh := func(name string, args ...string) error {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %v (log: %s)", name, err, logPath)
		}
		return nil
	}
	if err := sh("debootstrap", "--variant=minbase", suite, root, mirror); err != nil {
		return err
	}
	if err := sh("/bin/sh", append([]string{"-c", script, "taskimg", root}, s.packages...)...); err != nil {
		return err
	}
	layerPath := filepath.Join(work, "layer.tar")
	if err := sh("tar", "--numeric-owner", "--one-file-system", "-C", root,
		"--exclude=./proc/*", "--exclude=./sys/*", "--exclude=./dev/*", "-cf", layerPath, "."); err != nil {
		return err
	}
	layer, err := tarball.LayerFromFile(layerPath)
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = runtime.GOARCH, "linux"
	cf.Config = v1.Config{Cmd: s.cmd, Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	tag, err := name.NewTag(s.tag)
	if err != nil {
		return err
	}
	tmp := filepath.Join(work, "image.tar")
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		return err
	}
	sum, err := filehash.SHA256(tmp)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, entry+".tar"); err != nil {
		return err
	}
	// The digest file appears last: its presence means the entry is whole.
	return os.WriteFile(entry+".sha256", []byte(sum+"\n"), 0o600)
}

// copyVerified copies entry.tar to dst, hashing on the way, and fails
// (removing dst) unless the hash is the one recorded at build time.
func copyVerified(entry, dst string) error {
	want, err := os.ReadFile(entry + ".sha256")
	if err != nil {
		return err
	}
	in, err := os.Open(entry + ".tar")
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, h), in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if got := hex.EncodeToString(h.Sum(nil)); got != strings.TrimSpace(string(want)) {
			err = fmt.Errorf("%s.tar has sha256 %s, not %s as when it was built: remove %s.* to rebuild", entry, got, strings.TrimSpace(string(want)), entry)
		}
	}
	if err != nil {
		os.Remove(dst)
	}
	return err
}
