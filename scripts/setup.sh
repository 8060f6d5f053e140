#!/usr/bin/env bash
# Sets up what the tests use, so that none skips for a missing package or
# cache. scripts/test.sh runs it first; run it alone to prepare a machine.
#
# As root it installs the Debian packages below with apt-get (from the
# host's own apt sources) and builds the cached Debian sid root whose
# newest mke2fs the orphan-file and resize cross-checks use (a few minutes
# once, from the host's Debian mirror; bench/sidroot.sh). Without root it
# changes nothing: it lists what is missing, which tests will skip for it,
# and the one command that would set it up.
#
# usage: scripts/setup.sh        (GVX_SETUP_SID=0 leaves the sid root out)
set -uo pipefail
cd "$(dirname "$0")/.."
command -v go >/dev/null || export PATH=/usr/local/go/bin:$PATH
export CGO_ENABLED=0

# The real peers the tests check gvx against:
#   e2fsprogs, attr      the ext4 peers (e2fsck, debugfs, mkfs.ext4 -d, setfattr)
#   erofs-utils          the EROFS peer (mkfs.erofs, fsck.erofs, dump.erofs)
#   xfsprogs, btrfs-progs reflink-capable loop filesystems
#   busybox-static       the tiny test images
#   strace               kills a real process at its Nth write (crash tests)
#   docker.io            the host docker CLI and a host dockerd as peers
#   debootstrap          the Docker-inside test image and the sid root
#   docker-compose       compose driving an episode's daemon
#   python3              the Python client's tests
#   python3-venv         a venv with pip for its offline install test
# and what a minimal Debian (debootstrap --variant=minbase: bench/freshroot.sh)
# lacks that a full install has:
#   ca-certificates      go's module downloads (HTTPS) and debootstrap's
#   git                  test.sh's gofmt list (git ls-files), go build's VCS
#                        stamp of the binaries tests build, --version's test
#   iproute2             ip: the network namespaces of the egress tests
#   kmod                 modprobe overlay, where overlayfs is a module
packages=(e2fsprogs attr erofs-utils xfsprogs btrfs-progs busybox-static strace
	docker.io debootstrap docker-compose python3 python3-venv
	ca-certificates git iproute2 kmod)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done

status=0
if [ "${#missing[@]}" -gt 0 ]; then
	if [ "$(id -u)" = 0 ]; then
		echo "setup: installing ${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		if ! apt-get -o DPkg::Lock::Timeout=600 update -qq ||
			! apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${missing[@]}" >/dev/null; then
			echo "setup: apt-get install ${missing[*]} failed: the tests that need them will skip or fail" >&2
			status=1
		fi
	else
		echo "setup: not root, so nothing is installed; missing: ${missing[*]}"
		echo "       the tests that need them skip (each says why at the end of the run);"
		echo "       to install them: sudo ./scripts/setup.sh"
	fi
else
	echo "setup: every package the tests use is installed"
fi

if [ "${GVX_SETUP_SID:-1}" != 0 ]; then
	if [ "$(id -u)" = 0 ] && command -v debootstrap >/dev/null; then
		# shellcheck source=../bench/sidroot.sh
		. bench/sidroot.sh
		if root=$(sidroot e2fsprogs); then
			echo "setup: Debian sid root with the newest mke2fs: $root"
		else
			# sid moves: a day it cannot be bootstrapped is no failure of
			# gvx's; its tests skip and say so.
			echo "setup: no Debian sid root today (see the log above): the tests of the newest mke2fs skip"
		fi
	else
		echo "setup: not root (or no debootstrap): the tests of the newest mke2fs (orphan_file, resize) skip;"
		echo "       to build their Debian sid root: sudo ./scripts/setup.sh"
	fi
fi
exit "$status"
