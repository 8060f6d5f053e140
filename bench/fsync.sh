#!/usr/bin/env bash
# What a guest fsync costs end to end: bench/fsyncbench does N times
# (append 4 KiB to one file + fsync) on an ext4lite volume as today
# (durability=full: the journal commit plus the host's fsync(2)s), on one
# with durability=episode (the journal commit, no host flush), and on a
# tmpfs mount, ROUNDS times each, taking turns. Per target: the guest's
# wall time per operation (as the guest sees it), and the CPU of every
# process of the episode per operation: bash's `time` of the whole
# `rungv run` (its reaped descendants: Sentry, gofer, stubs) minus the same
# episode with N=0, over N.
#
# usage: bench/fsync.sh [N] [ROUNDS]   (defaults 2000, 3; needs go)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-2000}
rounds=${2:-3}
work=$(mktemp -d /var/tmp/gvx-fsync-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
CGO_ENABLED=0 go build -o "$work/rungv" ./cmd/rungv
CGO_ENABLED=0 go build -o "$work/" ./cmd/gvx-vol
mkdir -p "$work/bin"
CGO_ENABLED=0 go build -o "$work/bin/" ./bench/fsyncbench
CGO_ENABLED=0 go run ./runtime/runtimetest/mk "$work/image"
export GVX_CACHE_DIR=$work/cache
"$work/gvx-vol" create --size 1G "$work/full.ext4" >/dev/null
"$work/gvx-vol" create --size 1G "$work/episode.ext4" >/dev/null
echo "== $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); N=$n, $rounds rounds"
TIMEFORMAT=%3U+%3S
# one TARGET COUNT: prints "TARGET COUNT GUEST_WALL_NS CPU_S".
one() {
	local t=$1 count=$2 m
	case $t in
	full) m="type=volume,src=$work/full.ext4,dst=/t" ;;
	episode) m="type=volume,src=$work/episode.ext4,dst=/t,durability=episode" ;;
	tmpfs) m="type=tmpfs,dst=/t" ;;
	esac
	local out cpu
	{ cpu=$( { time "$work/rungv" run --network none --mount "$m" --mount "type=bind,src=$work/bin,dst=/b,readonly" \
		"oci:$work/image" /b/fsyncbench /t "$count" >"$work/out" 2>"$work/err"; } 2>&1 ); } || { cat "$work/err" >&2; exit 1; }
	out=$(cat "$work/out")
	echo "$t $count ${out##* } $(echo "$cpu" | awk -F+ '{print $1+$2}')"
}
for r in $(seq 1 "$rounds"); do
	for t in full episode tmpfs; do
		one "$t" 0
		one "$t" "$n"
	done
done | tee "$work/raw" | awk -v n="$n" '
	$2 == 0 { base[$1] = $4; next }
	{ w = $3 / n / 1000; c = ($4 - base[$1]) / n * 1e6
	  ws[$1] = ws[$1] " " w; cs[$1] = cs[$1] " " c
	  if (!($1 in bw) || w < bw[$1]) bw[$1] = w
	  if (!($1 in bc) || c < bc[$1]) bc[$1] = c }
	END { printf "%-8s %14s %14s   (per fsync; best of the rounds; all rounds: wall | cpu)\n", "target", "guest wall us", "CPU us"
	      for (t in bw) printf "%-8s %14.0f %14.0f   %s |%s\n", t, bw[t], bc[t], ws[t], cs[t] }'
