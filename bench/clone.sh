#!/usr/bin/env bash
# Clone latency of gvx-vol clone vs cp --reflink=always, side by side, on a
# loop-mounted XFS (mkfs.xfs -m reflink=1) the script makes and removes.
# Golden files: 16 GiB sparse ones holding 1 GiB of data, in one extent in
# the middle or in 64 extents spread over the file, and a 1 GiB dense one.
# O(1) in the size means 16G-1ext and 1G-dense clone in the same time (ratio
# near 1); a clone's cost grows with the number of extents instead, which
# 16G-64ext shows. Then the full-copy cost that --reflink=always
# refuses to pay silently, the space 10 clones take, and the in-process Go
# benchmark BenchmarkClone.
#
# The goal (issue 29): whole-process `gvx-vol clone` <= 2x `cp
# --reflink=always`, by median and by minimum; the ratios are printed last
# in the latency table, and again from bench/cmdtime, which runs gvx-vol and
# cp in turn, gvx-vol as scripts/build.sh (the README's build) makes it and
# as a plain `go build` does (hyperfine runs each command's block after the other's, so on a
# shared machine a burst of other work lands on one side and its medians
# say little). (The clone that matters runs in-process: the SDK, the pool
# and rungv serve call package reflink, ~1 ms.)
#
# usage: sudo bench/clone.sh [RUNS]   (default 50; uses hyperfine if
# installed and NO_HYPERFINE is unset, else a date +%s%N loop; needs
# xfsprogs, go, python3 for the ratios, ~3.5 GiB in /var/tmp)
# env:   GVX_VOL=path: a prebuilt gvx-vol instead of go build (so a shared bench lock is not held while building)
#        ROUNDS=n: bench/cmdtime's rounds (default 200)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-50}
[ "$(id -u)" = 0 ] || { echo "bench/clone.sh: needs root to loop-mount XFS" >&2; exit 1; }
for t in mkfs.xfs mount umount go cp; do
	command -v "$t" >/dev/null || { echo "bench/clone.sh: needs $t" >&2; exit 1; }
done

work=$(mktemp -d /var/tmp/gvx-clone-bench.XXXXXX)
mnt=$work/mnt
cleanup() {
	umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

truncate -s 8G "$work/xfs.img"
mkfs.xfs -q -m reflink=1 "$work/xfs.img"
mkdir "$mnt"
mount -o loop,nosuid,nodev "$work/xfs.img" "$mnt"
# gvx-vol as scripts/build.sh (the README's build) makes it, and as a plain
# `go build` makes it (with urfave/cli's man-page generator and its
# blackfriday init: docs/gvx-vol.md, "Start-up"), for the interleaved rows.
gvx=${GVX_VOL:-}
if [ -z "$gvx" ]; then
	CGO_ENABLED=0 go build -tags urfave_cli_no_docs -o "$work/" ./cmd/gvx-vol
	gvx=$work/gvx-vol
fi
mkdir "$work/plain"
CGO_ENABLED=0 go build -o "$work/plain/" ./cmd/gvx-vol
CGO_ENABLED=0 go build -o "$work/" ./bench/cmdtime

echo "== $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) (other work skews every number below)"
echo "== making golden files on $(uname -r) XFS (reflink=1)"
g16=$mnt/golden-16G-64ext.ext4
g16one=$mnt/golden-16G-1ext.ext4
g1=$mnt/golden-1G.ext4
truncate -s 16G "$g16" "$g16one"
for i in $(seq 0 63); do # 16 MiB of data every 256 MiB
	dd if=/dev/urandom of="$g16" bs=16M count=1 seek=$((i * 16)) conv=notrunc iflag=fullblock status=none
done
dd if=/dev/urandom of="$g16one" bs=16M count=64 seek=512 conv=notrunc iflag=fullblock status=none
dd if=/dev/urandom of="$g1" bs=16M count=64 iflag=fullblock status=none
sync
for g in "$g16" "$g16one" "$g1"; do
	printf '%s: size %s, allocated %s, %s extents\n' "$(basename "$g")" \
		"$(stat -c %s "$g")" "$(du -h "$g" | cut -f1)" "$(filefrag "$g" | awk '{print $2}')"
done

ep=$mnt/ep.ext4
echo
echo "== clone latency, $runs runs each (each run: a fresh DST; rm not timed)"
if [ -z "${NO_HYPERFINE:-}" ] && command -v hyperfine >/dev/null; then
	hyperfine -N --warmup 3 --runs "$runs" --prepare "rm -f $ep" \
		--export-json "$work/clone.json" --export-markdown "$work/clone.md" \
		-n "gvx-vol clone 16G-1ext" "$gvx clone -q $g16one $ep" \
		-n "gvx-vol clone 16G-64ext" "$gvx clone -q $g16 $ep" \
		-n "gvx-vol clone 1G-dense" "$gvx clone -q $g1 $ep" \
		-n "gvx-vol clone --no-sync 16G-1ext" "$gvx clone -q --no-sync $g16one $ep" \
		-n "gvx-vol clone --no-sync 16G-64ext" "$gvx clone -q --no-sync $g16 $ep" \
		-n "gvx-vol clone --no-sync 1G-dense" "$gvx clone -q --no-sync $g1 $ep" \
		-n "cp --reflink=always 16G-1ext" "cp --reflink=always $g16one $ep" \
		-n "cp --reflink=always 16G-64ext" "cp --reflink=always $g16 $ep" \
		-n "cp --reflink=always 1G-dense" "cp --reflink=always $g1 $ep" >/dev/null
	cat "$work/clone.md"
	python3 - "$work/clone.json" <<'PY' || true
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
print()
print(f"{'command':40} {'median ms':>10} {'min ms':>8}")
for c, x in r.items():
    print(f"{c:40} {x['median'] * 1e3:10.2f} {x['min'] * 1e3:8.2f}")
print()
for p in ("gvx-vol clone ", "gvx-vol clone --no-sync ", "cp --reflink=always "):
    for g in ("16G-1ext", "16G-64ext"):
        a, b = r[p + g], r[p + "1G-dense"]
        print(f"{p + g:40} / 1G-dense: median ratio {a['median'] / b['median']:.2f}, min ratio {a['min'] / b['min']:.2f}")
print()
print("the goal (issue 29): whole-process gvx-vol clone <= 2x cp --reflink=always (hyperfine's blocks, one after the other)")
for p in ("gvx-vol clone ", "gvx-vol clone --no-sync "):
    for g in ("16G-1ext", "16G-64ext", "1G-dense"):
        a, b = r[p + g], r["cp --reflink=always " + g]
        print(f"{p + g:40} / cp: median ratio {a['median'] / b['median']:.2f}, min ratio {a['min'] / b['min']:.2f}")
PY
else
	echo "(without hyperfine: a date +%s%N loop; median / mean / min in ms)"
	measure() {
		local name=$1
		shift
		for _ in $(seq "$runs"); do
			rm -f "$ep"
			t0=$(date +%s%N)
			"$@"
			t1=$(date +%s%N)
			echo $((t1 - t0))
		done | sort -n | awk -v n="$name" '{a[NR] = $1; s += $1}
			END {printf "%-36s %8.3f %8.3f %8.3f\n", n, a[int((NR + 1) / 2)] / 1e6, s / NR / 1e6, a[1] / 1e6}'
	}
	for g in "16G-1ext:$g16one" "16G-64ext:$g16" "1G-dense:$g1"; do
		measure "gvx-vol clone ${g%%:*}" "$gvx" clone -q "${g#*:}" "$ep"
		measure "gvx-vol clone --no-sync ${g%%:*}" "$gvx" clone -q --no-sync "${g#*:}" "$ep"
		measure "cp --reflink=always ${g%%:*}" cp --reflink=always "${g#*:}" "$ep"
	done
fi

echo
echo "== the goal again, interleaved: each round runs gvx-vol clone, clone --no-sync and cp once (bench/cmdtime)"
for g in "16G-1ext:$g16one" "1G-dense:$g1"; do
	echo "-- ${g%%:*}"
	"$work/cmdtime" -n "${ROUNDS:-200}" -rm "$ep" "$gvx clone -q ${g#*:} $ep" \
		"$gvx clone -q --no-sync ${g#*:} $ep" "$work/plain/gvx-vol clone -q ${g#*:} $ep" \
		"cp --reflink=always ${g#*:} $ep" | sed "s#$mnt/##g; s#$work/##g"
done
rm -f "$ep"

echo
echo "== what a silent full copy would cost (16G-64ext: copies its 1 GiB of data)"
echo "   (both made durable: gvx-vol fsyncs itself, cp is followed by sync FILE;"
echo "   3 alternating rounds, so one burst of other I/O does not decide it)"
for round in 1 2 3; do
	for cmd in "$gvx clone -q --reflink=never $g16 $ep" "cp --reflink=never $g16 $ep"; do
		rm -f "$ep"
		sync
		t0=$(date +%s%N)
		$cmd
		sync "$ep"
		t1=$(date +%s%N)
		printf 'round %d: %-56s %6d ms, allocated %s\n' "$round" "$(echo "$cmd" | sed "s#$mnt/##g; s#$work/##")" \
			"$(((t1 - t0) / 1000000))" "$(du -h "$ep" | cut -f1)"
	done
done
rm -f "$ep"

echo
echo "== space: 10 clones of 16G-64ext"
# XFS frees a removed file's blocks in the background (inode inactivation),
# so the full copies removed above may still be freeing: wait until the
# free space stops changing before reading it.
settled() {
	local a b
	sync
	a=$(df -B1 --output=avail "$mnt" | tail -1)
	for _ in $(seq 50); do
		sleep 0.2
		sync
		b=$(df -B1 --output=avail "$mnt" | tail -1)
		[ "$a" = "$b" ] && break
		a=$b
	done
	echo "$a"
}
before=$(settled)
"$gvx" clone -q --count 10 "$g16" "$mnt/ep-%04d.ext4"
after=$(settled)
echo "free space used by 10 clones: $(((before - after) / 1024)) KiB (each clone holds 1 GiB of data)"
filefrag -v "$mnt/ep-0000.ext4" | grep -c shared | xargs echo "extents of ep-0000.ext4 flagged shared by filefrag -v:"
rm -f "$mnt"/ep-*.ext4

echo
echo "== in-process: go test -bench BenchmarkClone ./reflink/ (GVX_BENCH_DIR on this XFS); load $(cut -d' ' -f1-3 /proc/loadavg)"
GVX_BENCH_DIR=$mnt CGO_ENABLED=0 go test -run '^$' -bench BenchmarkClone -benchmem -count 1 ./reflink/ | grep -E '^(Benchmark|cpu)'
