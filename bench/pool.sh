#!/usr/bin/env bash
# Episode pool: the reflink way against the slow way, side by side.
#
# Makes a loop-mounted XFS (mkfs.xfs -m reflink=1), a golden volume holding
# CONTENT (default: the Go toolchain's src tree, ~15k files, as a stand-in for
# preloaded images), and runs `rungv pool` at 1, 4 and 8 episodes in
# parallel: reset (clone) latency, ready latency (rungv start to the guest's
# first line), teardown latency (kill, wait, unlink), unshared bytes per
# clone, episodes per minute. Then the slow way, with the same workload and
# parallelism: each episode makes a fresh volume and loads the content again
# (gvx-vol create + gvx-vol import of CONTENT's tar) before it runs.
#
# The workload is the busybox test image and a shell command (read the volume,
# write a file) until the Docker-inside image runs under rungv; then set
# IMAGE and CMD to a dind image and a `docker run`.
#
# usage: sudo bench/pool.sh [EPISODES]   (default 32 per parallelism; the
# slow way runs EPISODES/4). Env: CONTENT=DIR, JOBS="1 4 8", SIZE=4G.
# Needs xfsprogs, go, jq; ~3 GiB in /var/tmp, removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-32}
jobs=${JOBS:-1 4 8}
size=${SIZE:-4G}
[ "$(id -u)" = 0 ] || { echo "bench/pool.sh: needs root to loop-mount XFS" >&2; exit 1; }
for t in mkfs.xfs mount umount go jq tar; do
	command -v "$t" >/dev/null || { echo "bench/pool.sh: needs $t" >&2; exit 1; }
done
content=${CONTENT:-$(go env GOROOT)/src}

work=$(mktemp -d /var/tmp/gvx-pool-bench.XXXXXX)
mnt=$work/mnt
cleanup() {
	umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

echo "== $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine skews every number)"
CGO_ENABLED=0 go build -o "$work/rungv" ./cmd/rungv
CGO_ENABLED=0 go build -o "$work/" ./cmd/gvx-vol
go run ./runtime/runtimetest/mk "$work/image"
rungv=$work/rungv gvx=$work/gvx-vol
image=${IMAGE:-oci:$work/image}
export GVX_CACHE_DIR=$work/cache

truncate -s 16G "$work/xfs.img"
mkfs.xfs -q -m reflink=1 "$work/xfs.img"
mkdir "$mnt"
mount -o loop,nosuid,nodev "$work/xfs.img" "$mnt"

tar -C "$(dirname "$content")" -cf "$work/content.tar" "$(basename "$content")"
echo "== golden volume: $size, holding $content ($(du -sh --apparent-size "$work/content.tar" | cut -f1) tar, $(tar -tf "$work/content.tar" | wc -l) entries)"
t0=$(date +%s%N)
"$gvx" create --size "$size" --from "$work/content.tar" "$mnt/golden.ext4" >/dev/null
"$gvx" compact "$mnt/golden.ext4"
echo "   built in $(( ($(date +%s%N) - t0) / 1000000 )) ms (once)"
sum0=$(sha256sum "$mnt/golden.ext4" | cut -d' ' -f1)

# The episode: read the preloaded content, write 1 MiB into the volume, then
# stay up like a daemon; the pool ends it 100 ms after it is ready (so the
# teardown kills a live sandbox, as an RL episode's does).
# The slow way runs the same work, then 100 ms, then exits.
work_cmd=${CMD:-'ls /var/lib/docker/* >/dev/null; dd if=/dev/zero of=/var/lib/docker/episode bs=64k count=16 2>/dev/null'}
cmd="$work_cmd; echo up; exec sleep 1000"
slow_cmd="$work_cmd; sleep 0.1"

printf '\n== reflink way: rungv pool, %d episodes each (ms; p50/p95)\n' "$n"
printf '%-4s %14s %14s %14s %12s %10s\n' "-j" "reset" "ready" "teardown" "unshared" "ep/min"
for j in $jobs; do
	"$rungv" pool --golden "$mnt/golden.ext4" --scratch "$mnt/eps" -n "$n" -j "$j" --ready up --json \
		--kill-after 100ms "$image" sh -c "$cmd" >"$work/pool-$j.json" || { jq '.episodes[] | select(.error)' "$work/pool-$j.json"; exit 1; }
	jq -r --arg j "$j" '.summary | [$j,
		"\(.reset.p50_ms)/\(.reset.p95_ms)", "\(.ready.p50_ms)/\(.ready.p95_ms)",
		"\(.teardown.p50_ms)/\(.teardown.p95_ms)", "\(.allocated_bytes_p50/1024|floor) KiB",
		(.episodes_per_minute|floor)] | @tsv' "$work/pool-$j.json" |
		awk -F'\t' '{printf "%-4s %14s %14s %14s %12s %10s\n", $1, $2, $3, $4, $5, $6}'
done
[ "$(sha256sum "$mnt/golden.ext4" | cut -d' ' -f1)" = "$sum0" ] || { echo "bench/pool.sh: the golden volume changed!" >&2; exit 1; }
left=$(find "$mnt" -name 'ep-*' | wc -l)
[ "$left" = 0 ] || { echo "bench/pool.sh: $left files left in the scratch dir" >&2; exit 1; }
echo "   golden unchanged (sha256), scratch dir empty"

# The slow way: a fresh volume with the content loaded again, per episode.
slow_n=$(( n / 4 > 0 ? n / 4 : 1 ))
printf '\n== slow way: fresh volume + content loaded again, %d episodes each (ms)\n' "$slow_n"
printf '%-4s %14s %10s\n' "-j" "reset p50" "ep/min"
slow_episode() { # $1: episode number; prints its reset (create+import) in ms
	local v=$mnt/slow/ep-$1.ext4 t0 t1
	t0=$(date +%s%N)
	"$gvx" create --size "$size" "$v" >/dev/null
	"$gvx" import "$v" "$work/content.tar" >/dev/null
	t1=$(date +%s%N)
	"$rungv" run --mount "type=volume,src=$v,dst=/var/lib/docker" "$image" sh -c "$slow_cmd" >/dev/null
	rm -f "$v"
	echo $(( (t1 - t0) / 1000000 ))
}
export -f slow_episode
export mnt gvx rungv image slow_cmd size work
mkdir -p "$mnt/slow"
for j in $jobs; do
	t0=$(date +%s%N)
	seq "$slow_n" | xargs -P "$j" -I{} bash -c 'slow_episode {}' >"$work/slow-$j.txt"
	wall=$(( $(date +%s%N) - t0 ))
	p50=$(sort -n "$work/slow-$j.txt" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	printf '%-4s %14s %10d\n' "$j" "$p50" $(( slow_n * 60000000000 / wall ))
done
