#!/usr/bin/env bash
# bench/freshroot.sh: README's test command from a fresh clone on a machine
# with nothing installed but Go (issue 27's proof), as root, in a
# debootstrapped root of its own (pivot_root in a mount namespace).
#
#   sudo bench/freshroot.sh              # runs ./scripts/test.sh in it
#   sudo bench/freshroot.sh CMD...       # runs CMD instead, in the clone
#
# 1. A Debian minbase root of the host's release (bookworm), debootstrapped
#    once from the host's apt mirror (found as image/dindtest finds it: go
#    run ./bench/debmirror; $GVX_DEBIAN_MIRROR overrides) and cached in
#    $GVX_BENCH_CACHE (/var/tmp/gvx-bench-cache-UID, the caller's own; see
#    bench/sidroot.sh's debroot), is copied to a new work dir
#    /var/tmp/gvx-freshroot.XXXXXX/root: every run starts from a root that
#    nothing has touched.
# 2. Go (`go env GOROOT`) is copied to its /usr/local/go, the host's
#    resolv.conf and apt sources (sources.list and sources.list.d/*.list,
#    *.sources: no apt.conf.d, no auth.conf.d) and the CA certificates the
#    host trusts beyond Debian's bundle (regular files in /etc/ssl/certs
#    and /usr/local/share/ca-certificates: this machine's egress re-signs
#    TLS, so the module downloads need its CA, as any machine here would)
#    are copied in, and the
#    checkout is cloned (git clone --no-hardlinks of its HEAD, from the host
#    side: the root has no git until scripts/setup.sh installs it) to
#    /root/gvx. Uncommitted changes are not in the clone.
# 3. In a new mount and PID namespace (unshare --mount --pid --fork
#    --kill-child: when the script, or unshare, dies, every process of the
#    run dies, and with them the namespace and all its mounts: nothing is
#    ever mounted in the host's namespace), it mounts what a real machine
#    has: proc (this PID namespace's), sysfs, the host's cgroup layout
#    (cgroup2 at /sys/fs/cgroup when the host's is unified; this host's is
#    hybrid, with the controllers bound to v1 hierarchies that a new
#    cgroup2 mount cannot have, so its /sys/fs/cgroup tree is bound),
#    devtmpfs at /dev (the kernel's one devtmpfs: loop devices appear as on
#    the host) with a new devpts instance and a new tmpfs /dev/shm, a new
#    tmpfs at /tmp and /run, and the host's kernel modules read-only
#    (/usr/lib/modules: a real machine has its kernel's). /var/tmp is the
#    root's own directory.
# 4. Makes the root the namespace's own with pivot_root (not chroot: a
#    chrooted process may not make a user namespace, which every machine
#    lets an unprivileged user do and the tests use) and runs the command
#    as root in a login-like environment
#    (env -i: HOME=/root, PATH with /usr/local/go/bin as Go's tarball
#    instructions add), from /root/gvx.
#
# Logs stay outside the root: $GVX_FRESH_LOGS (default the work dir's logs/):
# console.log (everything the command printed) and test.sh's per-phase logs
# (the clone's .test-logs is a bind mount of it). The root is removed on exit
# unless FRESH_KEEP=1. The exit status is the command's.
#
# FRESH_ROOT=/var/tmp/gvx-freshroot.XXXXXX/root runs the command again in a
# root an earlier run kept (not fresh: for a few tests again), logs in a new
# logs.XXXXXX beside it.
set -euo pipefail
# One brace group to the end, so that bash has read all of it before it
# runs any: editing this file during a run changes nothing in that run (the
# namespace side runs the copy in the work dir).
{
if [ "${1:-}" = __inside ]; then
	# Inside the new namespaces (pid 1 of the PID namespace).
	shift
	root=$1
	logs=$2
	shift 2
	cleanup() {
		# Only this namespace sees these mounts; they would go with it
		# anyway: unmount in reverse order for a clean end.
		umount -R "$root" 2>/dev/null || true
	}
	trap cleanup EXIT
	mount --make-rprivate /
	# Bind the root on itself so that umount -R "$root" takes every mount.
	mount --bind "$root" "$root"
	mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
	mount -t sysfs -o nosuid,nodev,noexec sysfs "$root/sys"
	if [ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ]; then
		mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 "$root/sys/fs/cgroup"
	else
		mount --rbind /sys/fs/cgroup "$root/sys/fs/cgroup"
	fi
	mount -t devtmpfs -o nosuid devtmpfs "$root/dev"
	mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5,nosuid,noexec devpts "$root/dev/pts"
	mount --bind "$root/dev/pts/ptmx" "$root/dev/ptmx"
	mount -t tmpfs -o nosuid,nodev,mode=1777 shm "$root/dev/shm"
	mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs "$root/tmp"
	mount -t tmpfs -o nosuid,nodev,mode=0755 tmpfs "$root/run"
	mkdir -p "$root/usr/lib/modules"
	if [ -d /usr/lib/modules ]; then
		mount --bind -o ro /usr/lib/modules "$root/usr/lib/modules"
	fi
	mkdir -p "$root/root/gvx/.test-logs"
	mount --bind "$logs" "$root/root/gvx/.test-logs"
	# pivot_root, not chroot: the kernel refuses a chrooted process a new
	# user namespace (EPERM: every unprivileged-user-namespace test would
	# skip, as on no real machine); after pivot_root the root is this
	# mount namespace's own, as a machine's is.
	mkdir -p "$root/.freshroot-old"
	cd "$root"
	pivot_root . .freshroot-old
	cd /
	umount -l /.freshroot-old
	rmdir /.freshroot-old
	trap - EXIT
	rc=0
	/usr/bin/env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/bash \
		TERM="${TERM:-dumb}" LANG=C.UTF-8 \
		PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		/bin/bash -c 'cd /root/gvx && exec "$@"' freshroot "$@" || rc=$?
	exit "$rc"
fi

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
command -v go >/dev/null || export PATH=/usr/local/go/bin:$PATH
export CGO_ENABLED=0
[ "$(id -u)" = 0 ] || { echo "freshroot: needs root (debootstrap, mounts, pivot_root): sudo $0" >&2; exit 2; }
for c in debootstrap unshare pivot_root git; do
	command -v "$c" >/dev/null || { echo "freshroot: needs $c on the host (apt-get install debootstrap util-linux coreutils git)" >&2; exit 1; }
done
[ "$#" -gt 0 ] || set -- ./scripts/test.sh
# The commit to test, taken once: a commit made while this runs is not it.
head=$(git rev-parse HEAD)
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
	echo "freshroot: note: $repo has uncommitted changes; the clone has only HEAD (${head:0:7})" >&2
fi

if [ -n "${FRESH_ROOT:-}" ]; then
	# Again in a root an earlier run kept (FRESH_KEEP=1): not fresh (its
	# packages, caches and clone are as that run left them): for running
	# a few tests again. The root is kept.
	root=$(cd "$FRESH_ROOT" && pwd) || exit 2
	work=$(dirname "$root")
	case $work in /var/tmp/gvx-freshroot.*) ;; *)
		echo "freshroot: FRESH_ROOT=$FRESH_ROOT is not the root of an earlier run (/var/tmp/gvx-freshroot.XXXXXX/root)" >&2
		exit 2 ;;
	esac
	[ -d "$root/root/gvx" ] && [ -x "$root/usr/local/go/bin/go" ] || { echo "freshroot: $root has no /root/gvx or no Go: not a root of this script" >&2; exit 2; }
	logs=${GVX_FRESH_LOGS:-$(mktemp -d "$work/logs.XXXXXX")}
	FRESH_KEEP=1
else
	suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	[ -n "$suite" ] || { echo "freshroot: /etc/os-release names no VERSION_CODENAME: not a Debian host?" >&2; exit 1; }
	# shellcheck source=./sidroot.sh
	. bench/sidroot.sh
	base=$(debroot "$suite")
	[ -x "$base/usr/bin/apt-get" ] && [ -e "$base/etc/debian_version" ] || {
		echo "freshroot: $base is not a complete Debian root: remove it (it is rebuilt)" >&2
		exit 1
	}

	work=$(mktemp -d /var/tmp/gvx-freshroot.XXXXXX)
	root=$work/root
	logs=${GVX_FRESH_LOGS:-$work/logs}
fi
mkdir -p "$logs"
logs=$(cd "$logs" && pwd)
child=
finish() {
	local rc=$?
	trap - EXIT INT TERM HUP
	if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
		# unshare --fork ignores SIGTERM; its death SIGKILLs the
		# namespace's init (--kill-child), and with it every process of
		# the run.
		kill -KILL "$child" 2>/dev/null || true
		wait "$child" 2>/dev/null || true
	fi
	# Nothing is mounted here in the host's namespace; check before any rm.
	if findmnt -rn -o TARGET | grep -qF "$root"; then
		echo "freshroot: mounts left under $root (not removing it):" >&2
		findmnt -rn -o TARGET | grep -F "$root" >&2
	elif [ "${FRESH_KEEP:-0}" = 1 ]; then
		echo "freshroot: root kept: $root"
	else
		rm -rf "$root"
	fi
	echo "freshroot: logs in $logs"
	exit "$rc"
}
trap finish EXIT
trap 'exit 143' INT TERM HUP

if [ -z "${FRESH_ROOT:-}" ]; then
	echo "freshroot: copying the $suite root $base to $root"
	cp -a --reflink=auto "$base" "$root"
	rm -f "$root/.complete"
	goroot=$(go env GOROOT)
	echo "freshroot: copying Go $(go env GOVERSION) from $goroot"
	mkdir -p "$root/usr/local"
	cp -a "$goroot" "$root/usr/local/go"
	cp -L /etc/resolv.conf "$root/etc/resolv.conf"
	# The CA certificates this host trusts beyond Debian's bundle (a network
	# whose egress re-signs TLS: this one), as a machine on this network has
	# them: where ca-certificates (scripts/setup.sh installs it) adds them to
	# the bundle. Regular files only: Debian's own are symlinks.
	mkdir -p "$root/usr/local/share/ca-certificates"
	for f in /usr/local/share/ca-certificates/*.crt /etc/ssl/certs/*.pem /etc/ssl/certs/*.crt; do
		[ -f "$f" ] && [ ! -L "$f" ] || continue
		case ${f##*/} in ca-certificates.crt | ssl-cert-snakeoil.pem) continue ;; esac
		n=${f##*/}
		cp "$f" "$root/usr/local/share/ca-certificates/${n%.*}.crt"
		echo "freshroot: trusting the host's local CA ${f}"
	done
	[ -s "$root/etc/hosts" ] || printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
	rm -f "$root/etc/apt/sources.list"
	[ ! -f /etc/apt/sources.list ] || cp /etc/apt/sources.list "$root/etc/apt/sources.list"
	for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] && cp "$f" "$root/etc/apt/sources.list.d/"
	done
	for d in /etc/apt/keyrings /etc/apt/trusted.gpg.d; do
		[ -d "$d" ] && mkdir -p "$root$d" && cp -a "$d/." "$root$d/"
	done
	echo "freshroot: cloning $repo (${head:0:7}) to /root/gvx"
	git clone --quiet --no-hardlinks --no-checkout "$repo" "$root/root/gvx"
	git -C "$root/root/gvx" checkout --quiet "$head"
fi

echo "freshroot: running $* in $root as root (console: $logs/console.log)"
start=$(date +%s)
set +e
cp "$repo/bench/freshroot.sh" "$work/freshroot.$$.sh"
unshare --mount --pid --fork --kill-child --propagation private -- bash "$work/freshroot.$$.sh" __inside "$root" "$logs" "$@" \
	> >(tee "$logs/console.log") 2>&1 &
child=$!
wait "$child"
rc=$?
child=
set -e
echo "freshroot: $* exited $rc after $(( $(date +%s) - start )) s"
exit "$rc"
}
