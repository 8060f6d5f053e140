#!/usr/bin/env bash
# EROFS image build: gvx-vol erofs build against mkfs.erofs 1.5 (Debian
# bookworm, the host's) and mkfs.erofs 1.9.4 (erofs-utils from Debian sid,
# in a chroot this script builds once and caches), on the same tree, side by
# side in each round, uncompressed, each tool with its default workers.
# Per tool: wall time (best of RUNS rounds, warm page cache, output removed
# before every run) and the CPU time (user+sys) of that run, image size, and
# ratios gvx/peer. Two layouts:
#   full    = gvx-vol --profile full     vs  mkfs.erofs (defaults: inline tails, xattrs)
#   runtime = gvx-vol --profile runtime  vs  mkfs.erofs -Enoinline_data -x-1
# gvx-vol publishes its image atomically (fsync, rename, fsync of the
# directory); mkfs.erofs does not sync: gvx's times include that, and a
# "durable" column adds to each peer's time an fsync of its image. Every
# image is then checked with fsck.erofs. Then the in-process Go benchmarks.
#
# usage: bench/erofs.sh [SRC] [RUNS]   (default /usr/share, 3; GO_BENCH=0
# skips the Go benchmarks)
# Needs go and root (chroot; the first run also debootstraps Debian sid from
# the host's apt mirror, found as image/dindtest finds it, into
# $GVX_BENCH_CACHE, default /var/tmp/gvx-bench-cache-UID, ~200 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(realpath "${1:-/usr/share}")
runs=${2:-3}
cache=${GVX_BENCH_CACHE:-/var/tmp/gvx-bench-cache-$(id -u)}
[ "$(id -u)" = 0 ] || { echo "bench/erofs.sh: needs root (chroot into the sid chroot with erofs-utils 1.9.4)" >&2; exit 1; }
command -v go >/dev/null || { echo "bench/erofs.sh: needs go" >&2; exit 1; }

# host_mkfs makes sure the host has bookworm's erofs-utils.
host_mkfs() {
	if ! command -v mkfs.erofs >/dev/null || ! command -v fsck.erofs >/dev/null; then
		apt-get install -y -qq erofs-utils >&2
	fi
}

# The sid root with erofs-utils 1.9 (bench/sidroot.sh: debootstrap once from
# the host's apt mirror, cached), entered with chroot.
. bench/sidroot.sh

host_mkfs
sid=$(sidroot erofs-utils) || exit 1
work=$(mktemp -d /var/tmp/gvx-erofs-bench.XXXXXX)
# The chroot sees the tree and the output directory through bind mounts.
csrc=/mnt/gvx-bench-src-$$
cout=/mnt/gvx-bench-out-$$
cleanup() {
	umount "$sid$csrc" 2>/dev/null || true
	umount "$sid$cout" 2>/dev/null || true
	rmdir "$sid$csrc" "$sid$cout" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$sid$csrc" "$sid$cout"
mount --bind "$src" "$sid$csrc"
mount -o remount,bind,ro "$sid$csrc"
mount --bind "$work" "$sid$cout"

CGO_ENABLED=0 go build -o "$work/" ./cmd/gvx-vol
gvx=$work/gvx-vol
v15="erofs-utils $(dpkg-query -W -f='${Version}' erofs-utils 2>/dev/null || echo '?')"
v19=$(chroot "$sid" mkfs.erofs --version 2>&1 | head -1)
echo "== tree: $src ($(du -sh "$src" | cut -f1), $(find "$src" | wc -l) entries), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(uname -r)"
echo "== peers: host mkfs.erofs ($v15), sid chroot: $v19"
find "$src" -type f -print0 | xargs -0 cat >/dev/null 2>&1 || true # warm the page cache

# fsync_ms FILE: how long an fsync of FILE takes, in ms (what gvx-vol's
# publish does and mkfs.erofs leaves to the kernel).
fsync_ms() {
	local t0 t1
	t0=$(date +%s%N)
	dd if=/dev/null of="$1" conv=notrunc,fsync status=none
	t1=$(date +%s%N)
	echo $(( (t1 - t0) / 1000000 ))
}

# timed OUT CMD...: removes OUT, runs CMD, prints "WALL_MS CPU_MS".
timed() {
	local out=$1 t
	shift
	rm -f "$out"
	t=$( { TIMEFORMAT='%R %U %S'; time "$@" >/dev/null 2>"$work/err" || { echo "FAILED: $*" >&2; cat "$work/err" >&2; exit 1; }; } 2>&1 )
	awk '{ printf "%d %d\n", $1*1000, ($2+$3)*1000 }' <<<"$t"
}

echo "(durable = wall + an fsync of the image right after; gvx-vol's wall already includes its fsync)"
printf '%-8s %-22s %9s %9s %11s %12s\n' layout tool "wall(ms)" "cpu(ms)" "durable(ms)" "size(bytes)"
for layout in full runtime; do
	if [ "$layout" = full ]; then mk=(); else mk=(-Enoinline_data -x-1); fi
	declare -A bw=() bc=() bd=()
	for r in $(seq "$runs"); do
		# Rotate the order each round: no tool always runs first.
		tools=(gvx m15 m19)
		tools=("${tools[@]:$((r % 3))}" "${tools[@]:0:$((r % 3))}")
		for tool in "${tools[@]}"; do
			case $tool in
			gvx) res=$(timed "$work/gvx.erofs" "$gvx" erofs build -q --profile "$layout" "$src" "$work/gvx.erofs") ;;
			m15) res=$(timed "$work/m15.erofs" mkfs.erofs --quiet "${mk[@]}" "$work/m15.erofs" "$src") ;;
			m19) res=$(timed "$work/m19.erofs" chroot "$sid" mkfs.erofs --quiet "${mk[@]}" "$cout/m19.erofs" "$csrc") ;;
			esac
			read -r w c <<<"$res"
			d=$w
			[ "$tool" = gvx ] || d=$((w + $(fsync_ms "$work/$tool.erofs")))
			if [ -z "${bw[$tool]:-}" ] || [ "$w" -lt "${bw[$tool]}" ]; then bw[$tool]=$w bc[$tool]=$c; fi
			if [ -z "${bd[$tool]:-}" ] || [ "$d" -lt "${bd[$tool]}" ]; then bd[$tool]=$d; fi
		done
	done
	for tool in gvx m15 m19; do
		case $tool in gvx) name="gvx-vol erofs build" ;; m15) name="mkfs.erofs 1.5" ;; m19) name="mkfs.erofs 1.9.4" ;; esac
		printf '%-8s %-22s %9d %9d %11d %12d\n' "$layout" "$name" "${bw[$tool]}" "${bc[$tool]}" "${bd[$tool]}" "$(stat -c %s "$work/$tool.erofs")"
	done
	for peer in m19 m15; do
		awk -v l="$layout" -v p="$peer" -v a="${bw[gvx]}" -v b="${bw[$peer]}" -v c="${bc[gvx]}" -v d="${bc[$peer]}" \
			-v g="${bd[gvx]}" -v h="${bd[$peer]}" -v e="$(stat -c %s "$work/gvx.erofs")" -v f="$(stat -c %s "$work/$peer.erofs")" \
			'BEGIN { printf "%-8s gvx/%s: wall %.2fx, durable %.2fx, cpu %.2fx, size %.4fx\n", l, (p == "m19" ? "1.9.4" : "1.5"), a/b, g/h, c/d, e/f }'
	done
	for tool in gvx m15 m19; do
		out=$(fsck.erofs "$work/$tool.erofs" 2>&1) || { echo "fsck.erofs failed on $tool's $layout image: $out"; exit 1; }
		if grep -q '<E>' <<<"$out"; then echo "fsck.erofs complains about $tool's $layout image: $out"; exit 1; fi
	done
	unset bw bc bd
done
echo "(every image passes fsck.erofs)"

# From a tar: gvx-vol erofs build --from-tar (streams the archive, spools
# file data next to OUT) vs mkfs.erofs 1.9.4 --tar=f (1.5 has no tar input).
tar -C "$src" -cf "$work/tree.tar" . 2>/dev/null || true
declare -A bw=() bc=()
for r in $(seq "$runs"); do
	tools=(gvx m19)
	[ $((r % 2)) = 0 ] || tools=(m19 gvx)
	for tool in "${tools[@]}"; do
		case $tool in
		gvx) res=$(timed "$work/gvx.erofs" "$gvx" erofs build -q --from-tar "$work/tree.tar" "$work/gvx.erofs") ;;
		m19) res=$(timed "$work/m19.erofs" chroot "$sid" mkfs.erofs --quiet --tar=f "$cout/m19.erofs" "$cout/tree.tar") ;;
		esac
		read -r w c <<<"$res"
		if [ -z "${bw[$tool]:-}" ] || [ "$w" -lt "${bw[$tool]}" ]; then bw[$tool]=$w bc[$tool]=$c; fi
	done
done
printf '%-8s %-22s %9d %9d %12d\n' tar "gvx-vol --from-tar" "${bw[gvx]}" "${bc[gvx]}" "$(stat -c %s "$work/gvx.erofs")"
printf '%-8s %-22s %9d %9d %12d\n' tar "mkfs.erofs 1.9.4 --tar" "${bw[m19]}" "${bc[m19]}" "$(stat -c %s "$work/m19.erofs")"
awk -v a="${bw[gvx]}" -v b="${bw[m19]}" -v c="${bc[gvx]}" -v d="${bc[m19]}" -v e="$(stat -c %s "$work/gvx.erofs")" -v f="$(stat -c %s "$work/m19.erofs")" \
	'BEGIN { printf "tar      gvx/1.9.4: wall %.2fx, cpu %.2fx, size %.4fx\n", a/b, c/d, e/f }'
for tool in gvx m19; do
	out=$(fsck.erofs "$work/$tool.erofs" 2>&1) || { echo "fsck.erofs failed on $tool's tar image: $out"; exit 1; }
done
rm -f "$work/tree.tar"

[ "${GO_BENCH:-1}" = 1 ] || exit 0
echo "== go test -bench 'Build|Read|AddDir' ./erofs/"
CGO_ENABLED=0 go test -run '^$' -bench 'Build|Read|AddDir' -benchtime 5x ./erofs/ | grep -E '^(Benchmark|ok)'
