#!/usr/bin/env bash
# The episode server against the SDK in-process, in one run: episodes per
# minute and p50/p95 create→first-exec latency, through `rungv serve`'s HTTP
# API (create from a golden clone, exec `echo ready`, close) and through
# gvx.Pool (clone, start with `echo ready`, its line, teardown), with the
# same busybox image, golden volume and parallelism.
#
# usage: bench/serve.sh [EPISODES] [PARALLEL]   (default 32, 4)
# Needs go; as root it puts the golden volume on a loop XFS (reflink=1) so
# both sides clone, else both copy (--clone auto). Work in /var/tmp, removed
# on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-32}
j=${2:-4}
work=$(mktemp -d /var/tmp/gvx-serve-bench.XXXXXX)
mnt=$work/mnt
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	umount "$mnt" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
echo "== $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine skews every number)"
export CGO_ENABLED=0
go build -o "$work/rungv" ./cmd/rungv
go build -o "$work/" ./cmd/gvx-vol
go build -o "$work/servebench" ./serve/internal/servebench
go run ./runtime/runtimetest/mk "$work/image" >/dev/null
export GVX_CACHE_DIR=$work/cache
mkdir -p "$mnt"
if [ "$(id -u)" = 0 ] && command -v mkfs.xfs >/dev/null; then
	truncate -s 4G "$work/xfs.img"
	mkfs.xfs -q -m reflink=1 "$work/xfs.img"
	mount -o loop,nosuid,nodev "$work/xfs.img" "$mnt"
	echo "== golden and clones on a loop XFS (reflink)"
else
	echo "== golden and clones on $(stat -f -c %T "$work") (copies where it cannot clone)"
fi
mkdir -p "$work/tree" && echo gv >"$work/tree/golden.txt"
"$work/gvx-vol" create --size 1G --from "$work/tree" "$mnt/golden.ext4" >/dev/null
mkdir -p "$mnt/sdk" "$mnt/st"
"$work/rungv" serve --state-dir "$mnt/st" --clone auto --max-episodes "$j" -q >"$work/hello" &
pid=$!
for _ in $(seq 100); do [ -s "$work/hello" ] && break; sleep 0.1; done
sock=$(sed -n 's/.*"socket":"\([^"]*\)".*/\1/p' "$work/hello")
# One warm-up episode each way (the relay image is built on first use).
"$work/servebench" -socket "$sock" -rungv "$work/rungv" -image "oci:$work/image" -golden "$mnt/golden.ext4" -scratch "$mnt/sdk" -n 1 -j 1 >/dev/null 2>&1
echo "== $n episodes each, $j at a time"
"$work/servebench" -socket "$sock" -rungv "$work/rungv" -image "oci:$work/image" -golden "$mnt/golden.ext4" -scratch "$mnt/sdk" -n "$n" -j "$j"
