#!/usr/bin/env bash
# EROFS image build: gvx-vol erofs build vs mkfs.erofs on the same tree,
# side by side in one run: wall time (best of RUNS, warm page cache) and
# image size, for both layouts:
#   full    = gvx-vol --profile full     vs  mkfs.erofs (defaults: inline tails, xattrs)
#   runtime = gvx-vol --profile runtime  vs  mkfs.erofs -Enoinline_data -x-1
# Each image is then checked with fsck.erofs. Then the in-process Go
# benchmarks BenchmarkBuild and BenchmarkRead.
#
# usage: bench/erofs.sh [SRC] [RUNS]   (default /usr/share, 3; needs
# erofs-utils and go; root not needed, but unreadable files make both fail)
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:-/usr/share}
runs=${2:-3}
for t in mkfs.erofs fsck.erofs go; do
	command -v "$t" >/dev/null || { echo "bench/erofs.sh: needs $t (apt-get install erofs-utils)" >&2; exit 1; }
done
work=$(mktemp -d /var/tmp/gvx-erofs-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
CGO_ENABLED=0 go build -o "$work/gvx-vol" ./cmd/gvx-vol
gvx=$work/gvx-vol

echo "== tree: $src ($(du -sh "$src" | cut -f1), $(find "$src" | wc -l) entries), $(nproc) cores, $(uname -r), $(mkfs.erofs --version 2>&1 | head -1 || true)"
cat "$src" >/dev/null 2>&1 || true
find "$src" -type f -print0 | xargs -0 cat >/dev/null 2>&1 || true # warm the page cache

# best TIME of RUNS runs of a command, in seconds
best() {
	local b=""
	for _ in $(seq "$runs"); do
		local t0 t1 d
		t0=$(date +%s%N)
		"$@" >/dev/null 2>&1 || { echo "FAILED: $*" >&2; "$@" >&2 || true; exit 1; }
		t1=$(date +%s%N)
		d=$(( (t1 - t0) / 1000000 ))
		if [ -z "$b" ] || [ "$d" -lt "$b" ]; then b=$d; fi
	done
	echo "$b"
}

printf '%-8s %-10s %10s %12s\n' layout tool "time(ms)" "size(bytes)"
for layout in full runtime; do
	if [ "$layout" = full ]; then mk=(); else mk=(-Enoinline_data -x-1); fi
	tg=$(best "$gvx" erofs build -q --profile "$layout" "$src" "$work/gvx-$layout.erofs")
	tm=$(best mkfs.erofs --quiet "${mk[@]}" "$work/mkfs-$layout.erofs" "$src")
	sg=$(stat -c %s "$work/gvx-$layout.erofs")
	sm=$(stat -c %s "$work/mkfs-$layout.erofs")
	printf '%-8s %-10s %10d %12d\n' "$layout" gvx-vol "$tg" "$sg"
	printf '%-8s %-10s %10d %12d\n' "$layout" mkfs.erofs "$tm" "$sm"
	awk -v a="$tg" -v b="$tm" -v c="$sg" -v d="$sm" -v l="$layout" \
		'BEGIN { printf "%-8s ratio gvx/mkfs: time %.2fx, size %.4fx\n", l, a/b, c/d }'
	for img in "$work/gvx-$layout.erofs" "$work/mkfs-$layout.erofs"; do
		out=$(fsck.erofs "$img" 2>&1) || { echo "fsck.erofs failed on $img: $out"; exit 1; }
		if grep -q '<E>' <<<"$out"; then echo "fsck.erofs complains about $img: $out"; exit 1; fi
	done
done
echo "(both tools' images pass fsck.erofs)"

echo "== go test -bench 'Build|Read' ./erofs/"
go test -run '^$' -bench 'Build|Read' -benchtime 5x ./erofs/ | grep -E '^(Benchmark|ok)'
