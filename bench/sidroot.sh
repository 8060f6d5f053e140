# Sourced by bench scripts (bash): the newest peers from Debian sid.
#
#   sidroot PKG...          prints the path of a cached sid root filesystem
#                           (debootstrap --variant=minbase --include=PKG,…),
#                           built on first use (a few minutes) from the
#                           host's Debian mirror, found exactly as package
#                           image/dindtest finds it (go run ./bench/debmirror;
#                           $GVX_DEBIAN_MIRROR overrides). Cached under
#                           $GVX_BENCH_CACHE (/var/tmp/gvx-bench-cache-UID,
#                           the caller's own: root runs its binaries, so a
#                           cache another user could write is refused) by a
#                           key of mirror, suite and packages.
#   debroot SUITE PKG...    the same for another suite (bench/freshroot.sh:
#                           the host's release); sidroot is debroot sid.
#   sidcmd ROOT PROG        prints a command line that runs ROOT's PROG (an
#                           absolute path inside ROOT) with ROOT's own
#                           dynamic loader and libraries (dlopen included)
#                           on host paths: no chroot, so the bench's files
#                           need no bind mount; for hyperfine's sh -c.
sidroot() {
	debroot sid "$@"
}

debroot() {
	local suite=${1:?debroot: usage: debroot SUITE PKG...}
	shift
	local cache=${GVX_BENCH_CACHE:-/var/tmp/gvx-bench-cache-$(id -u)} mirror key root pkgs own
	command -v debootstrap >/dev/null || { echo "debroot: needs debootstrap (apt-get install debootstrap)" >&2; return 1; }
	mkdir -p -m 0700 "$cache" || return 1
	# The cache's binaries run as the caller (root, in CI): trust it only
	# if it is the caller's own directory that no one else can write.
	own=$(stat -c '%u %A' "$cache") || return 1
	if [ -L "$cache" ] || [ "${own%% *}" != "$(id -u)" ] || [ "$(echo "$own" | cut -c 7)" = w ] || [ "$(echo "$own" | cut -c 10)" = w ]; then
		echo "debroot: $cache is not a directory of uid $(id -u) that only it can write ($own): remove it, or set GVX_BENCH_CACHE to a directory of your own" >&2
		return 1
	fi
	mirror=$(CGO_ENABLED=0 go run ./bench/debmirror) || return 1
	key=$(printf '%s\n' "$mirror" "$suite" minbase "$@" | sha256sum | cut -c1-16)
	root=$cache/$suite-$key
	if [ ! -e "$root/.complete" ]; then
		mkdir -p "$cache"
		rm -rf "$root.tmp"
		pkgs=$(IFS=,; echo "$*")
		echo "   (building a Debian $suite root${pkgs:+ with $pkgs} in $root: a few minutes, once)" >&2
		if ! debootstrap --variant=minbase ${pkgs:+--include="$pkgs"} "$suite" "$root.tmp" "$mirror" >"$root.log" 2>&1; then
			echo "debroot: debootstrap of $suite failed; its log: $root.log" >&2
			return 1
		fi
		touch "$root.tmp/.complete"
		mv "$root.tmp" "$root"
	fi
	echo "$root"
}

sidcmd() {
	local root=$1 prog=$2 arch ld
	arch=$(uname -m)-linux-gnu
	ld=$(find "$root/usr/lib/$arch" "$root/usr/lib64" -maxdepth 1 -name 'ld-linux*.so.*' -type f 2>/dev/null | head -1)
	[ -n "$ld" ] || { echo "sidcmd: no dynamic loader in $root" >&2; return 1; }
	echo "$ld --library-path $root/usr/lib/$arch $root$prog"
}
