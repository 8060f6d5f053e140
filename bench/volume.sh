#!/usr/bin/env bash
# Small-file and bulk write speed inside an episode: untar of FILES small
# files and a 256 MiB dd, the same on
# an ext4lite volume (served over lisafs by the gofer extension), on a
# tmpfs mount, on the rootfs's memory overlay, and — in a second episode
# without volumes, so runsc keeps directfs — on a bind mount of a host
# directory (the Sentry calls the host kernel directly). Times are measured
# inside the guest (/proc/uptime, 10 ms resolution), so start-up is not
# counted.
#
# usage: bench/volume.sh [FILES]   (default 2000; needs busybox-static, go)
set -euo pipefail
cd "$(dirname "$0")/.."
files=${1:-2000}
work=$(mktemp -d /var/tmp/gvx-volume-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
CGO_ENABLED=0 go build -o "$work/rungv" ./cmd/rungv
CGO_ENABLED=0 go build -o "$work/gvx-vol" ./cmd/gvx-vol
CGO_ENABLED=0 go run ./runtime/runtimetest/mk "$work/image"
export GVX_CACHE_DIR=$work/cache
"$work/gvx-vol" create --size 2G "$work/vol.ext4" >/dev/null
# The tar is made once on the host (FILES small files in 100 directories)
# and bind-mounted read-only; each target untars it with busybox tar.
mkdir -p "$work/src/t"
for i in $(seq 1 "$files"); do d=$work/src/t/d$((i % 100)); mkdir -p "$d"; echo "file $i" >"$d/f$i"; done
mkdir -p "$work/tar"
tar -C "$work/src" -cf "$work/tar/small.tar" t
script='ms() { read u _ </proc/uptime; echo $(( ${u%.*}*1000 + (1${u#*.} - 100)*10 )); }
for d in $DIRS; do
  mkdir -p $d; s=$(ms); tar -xf /tar/small.tar -C $d; sync
  m=$(ms); dd if=/dev/zero of=$d/big bs=1M count=256 2>/dev/null; sync; e=$(ms)
  printf "%-9s untar %5d files: %6d ms   256 MiB dd: %6d ms\n" $d '"$files"' $((m-s)) $((e-m))
done'
echo "== $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$work/rungv" run --network none -e "DIRS=/vol /tmpfs /overlay" --mount "type=volume,src=$work/vol.ext4,dst=/vol" \
	--mount type=tmpfs,dst=/tmpfs --mount "type=bind,src=$work/tar,dst=/tar,readonly" "oci:$work/image" sh -c "$script"
mkdir "$work/bind"
"$work/rungv" run --network none -e DIRS=/bind --mount "type=bind,src=$work/bind,dst=/bind" \
	--mount "type=bind,src=$work/tar,dst=/tar,readonly" "oci:$work/image" sh -c "$script" |
	sed 's/$/    (directfs bind mount)/'
"$work/gvx-vol" fsck "$work/vol.ext4" >/dev/null && echo "volume fsck: clean"
