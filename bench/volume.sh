#!/usr/bin/env bash
# Small-file and bulk write speed inside an episode: untar of FILES small
# files and a 256 MiB dd, the same on
# an ext4lite volume (served over lisafs by the gofer extension), on a
# tmpfs mount, on the rootfs's memory overlay, and — in a second episode
# without volumes, so runsc keeps directfs — on a bind mount of a host
# directory (the Sentry calls the host kernel directly). Times are measured
# inside the guest (/proc/uptime, 10 ms resolution), so start-up is not
# counted. Each step ends with sync(2), as a build that must survive its
# episode would.
#
# The targets take turns, ROUNDS times (each round untars into a fresh
# directory and rewrites the dd file); each target's best round is shown.
# The ratios the issue tracks come last: volume vs tmpfs as the median of
# the rounds' own ratios (the two run back to back in one episode, so a
# neighbour's burst on a shared machine weighs on both), volume vs the
# directfs bind mount (another episode) from the best rounds.
#
# usage: bench/volume.sh [FILES] [ROUNDS]   (defaults 2000, 5; needs go)
set -euo pipefail
cd "$(dirname "$0")/.."
files=${1:-2000}
rounds=${2:-5}
work=$(mktemp -d /var/tmp/gvx-volume-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
CGO_ENABLED=0 go build -o "$work/rungv" ./cmd/rungv
CGO_ENABLED=0 go build -o "$work/" ./cmd/gvx-vol
CGO_ENABLED=0 go run ./runtime/runtimetest/mk "$work/image"
export GVX_CACHE_DIR=$work/cache
"$work/gvx-vol" create --size 4G "$work/vol.ext4" >/dev/null
# The tar is made once on the host (FILES small files in 100 directories)
# and bind-mounted read-only; each target untars it with busybox tar.
mkdir -p "$work/src/t"
for i in $(seq 1 "$files"); do d=$work/src/t/d$((i % 100)); mkdir -p "$d"; echo "file $i" >"$d/f$i"; done
mkdir -p "$work/tar"
tar -C "$work/src" -cf "$work/tar/small.tar" t
# One line per target and round: "TARGET ROUND UNTAR_MS DD_MS".
script='ms() { read u _ </proc/uptime; echo $(( ${u%.*}*1000 + (1${u#*.} - 100)*10 )); }
cat /tar/small.tar >/dev/null
for r in $(seq 1 $ROUNDS); do
  for d in $DIRS; do
    mkdir -p $d/r$r; s=$(ms); tar -xf /tar/small.tar -C $d/r$r; sync
    m=$(ms); dd if=/dev/zero of=$d/big bs=1M count=256 2>/dev/null; sync; e=$(ms)
    echo "$d $r $((m-s)) $((e-m))"
  done
done'
echo "== $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); $files files, best of $rounds rounds"
{
	"$work/rungv" run --network none -e "DIRS=/vol /tmpfs /overlay" -e "ROUNDS=$rounds" \
		--mount "type=volume,src=$work/vol.ext4,dst=/vol" --mount type=tmpfs,dst=/tmpfs \
		--mount "type=bind,src=$work/tar,dst=/tar,readonly" "oci:$work/image" sh -c "$script"
	mkdir "$work/bind"
	"$work/rungv" run --network none -e DIRS=/bind -e "ROUNDS=$rounds" --mount "type=bind,src=$work/bind,dst=/bind" \
		--mount "type=bind,src=$work/tar,dst=/tar,readonly" "oci:$work/image" sh -c "$script"
} | awk -v files="$files" '
	function max1(x) { return x > 0 ? x : 1 }
	function median(a, n,   i, j, t) {
		for (i = 1; i < n; i++) for (j = i; j > 0 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
		return n % 2 ? a[int(n/2)] : (a[n/2-1] + a[n/2]) / 2
	}
	{ U[$1, $2] = $3; D[$1, $2] = $4; if ($2 > rounds) rounds = $2 }
	!($1 in u) || $3 < u[$1] { u[$1] = $3 }
	!($1 in d) || $4 < d[$1] { d[$1] = $4 }
	!($1 in seen) { seen[$1] = 1; order[n++] = $1 }
	END {
		note["/vol"] = "(ext4lite volume over lisafs)"; note["/overlay"] = "(rootfs memory overlay)"
		note["/bind"] = "(directfs bind mount, an episode without volumes)"
		for (i = 0; i < n; i++) { t = order[i]; printf "%-9s untar %5d files: %6d ms   256 MiB dd: %6d ms   %s\n", t, files, u[t], d[t], note[t] }
		for (r = 1; r <= rounds; r++) { ru[r-1] = U["/vol", r] / max1(U["/tmpfs", r]); rd[r-1] = D["/vol", r] / max1(D["/tmpfs", r]) }
		printf "volume/tmpfs:  untar %.2fx   dd %.2fx   (median of %d rounds)\n", median(ru, rounds), median(rd, rounds), rounds
		printf "volume/bind:   untar %.2fx   dd %.2fx   (best rounds)\n", u["/vol"] / max1(u["/bind"]), d["/vol"] / max1(d["/bind"])
	}'
"$work/gvx-vol" fsck "$work/vol.ext4" >/dev/null && echo "volume fsck: clean"
if command -v e2fsck >/dev/null; then e2fsck -fn "$work/vol.ext4" >/dev/null 2>&1 && echo "volume e2fsck -fn: clean"; fi
