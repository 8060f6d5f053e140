#!/usr/bin/env bash
# The main job on an embedded default, no registry or internet needed:
# build gvx-vol and rungv, make a base image (Debian's busybox-static, packed
# as an OCI layout by the repo's own code), add it to the EROFS image cache,
# build a golden ext4lite volume, check it with e2fsck, compact it, reset N
# episodes from it by reflink clone (on a loop-mounted XFS when run as root,
# else a sparse copy), then run N isolated episodes in gVisor sandboxes, 4 at
# a time, each on its own clone mounted at /var/lib/docker, and print the
# pool's reset / ready / teardown latencies.
#
# usage: scripts/demo.sh [EPISODES]   (default 8)
set -euo pipefail
cd "$(dirname "$0")/.."
episodes=${1:-8}
export CGO_ENABLED=0 PATH=/usr/local/go/bin:$PATH

need_pkgs=()
command -v e2fsck >/dev/null || need_pkgs+=(e2fsprogs)
[ -x /bin/busybox ] || need_pkgs+=(busybox-static)
command -v mkfs.xfs >/dev/null || need_pkgs+=(xfsprogs)
if [ ${#need_pkgs[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "== installing ${need_pkgs[*]}"
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
	else
		echo "demo: please install: ${need_pkgs[*]}" >&2
		exit 1
	fi
fi

work=$(mktemp -d /var/tmp/gvx-demo.XXXXXX)
mnt=$work/xfs
cleanup() {
	mountpoint -q "$mnt" 2>/dev/null && umount "$mnt"
	rm -rf "$work"
}
trap cleanup EXIT
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

echo "== building gvx-vol"
go build -o "$work/gvx-vol" ./cmd/gvx-vol
echo "== building rungv (embeds gVisor's runsc; the first build takes a minute or two)"
go build -o "$work/rungv" ./cmd/rungv
go build -o "$work/mkbusybox" ./runtime/runtimetest/mk
vol() { "$work/gvx-vol" "$@"; }

echo "== base image: busybox as an OCI layout, added to the EROFS cache"
"$work/mkbusybox" "$work/busybox-oci"
t=$(date +%s%N)
vol image add --cache "$work/cache" --json "oci:$work/busybox-oci" >"$work/image.json"
echo "   image add: $(ms "$t") ms -> $(grep -o '"erofs": *"[^"]*"' "$work/image.json" | cut -d'"' -f4)"

echo "== golden volume: a 4 GiB ext4lite file holding a docker-like tree"
mkdir -p "$work/tree/overlay2/l" "$work/tree/image/overlay2" "$work/tree/containers"
cp -a /bin/busybox "$work/tree/overlay2/busybox"
for i in $(seq 1 2000); do echo "layer file $i" >"$work/tree/overlay2/l/f$i"; done
t=$(date +%s%N)
vol create --size 4G --from "$work/tree" "$work/golden.ext4"
echo "   create --from: $(ms "$t") ms"
e2fsck -fn "$work/golden.ext4" >/dev/null && echo "   e2fsck -fn: clean"
vol fsck "$work/golden.ext4"
vol compact "$work/golden.ext4"
vol info "$work/golden.ext4"

dest=$work/episodes
mode=auto
if [ "$(id -u)" = 0 ]; then
	echo "== reflink filesystem: a loop-mounted XFS"
	truncate -s 8G "$work/xfs.img"
	mkfs.xfs -q -m reflink=1 "$work/xfs.img"
	mkdir -p "$mnt"
	mount -o loop "$work/xfs.img" "$mnt"
	cp --sparse=always "$work/golden.ext4" "$mnt/golden.ext4"
	dest=$mnt
	mode=always
	golden=$mnt/golden.ext4
else
	echo "== not root: episodes are sparse copies (clone needs a reflink filesystem such as XFS or Btrfs)"
	mkdir -p "$dest"
	golden=$work/golden.ext4
fi
echo "== resetting $episodes episodes (gvx-vol clone --reflink=$mode)"
vol clone --reflink=$mode --count "$episodes" --json "$golden" "$dest/ep-%04d.ext4" >"$work/clones.json"
python3 - "$work/clones.json" <<'PY' 2>/dev/null || cat "$work/clones.json"
import json, sys
r = json.load(open(sys.argv[1]))
for c in r["clones"]:
    print(f'   {c["dst"].rsplit("/", 1)[-1]}: {c["method"]} in {c["latency_ms"]:.2f} ms, {c["copied"]} bytes copied')
lat = sorted(c["latency_ms"] for c in r["clones"])
print(f'   median reset: {lat[len(lat)//2]:.2f} ms of {len(lat)} (total {r["total_ms"]:.1f} ms)')
PY
vol fsck "$dest/ep-0000.ext4"
rm -f "$dest"/ep-*.ext4

echo "== $episodes episodes in gVisor sandboxes, 4 at a time (rungv pool)"
GVX_CACHE="$work/cache" "$work/rungv" pool --golden "$golden" --scratch "$dest" -n "$episodes" -j 4 --clone "$mode" --ready "episode" \
	--json "oci:$work/busybox-oci" \
	sh -c 'echo "episode $GVX_EPISODE" >/var/lib/docker/mine; ls /var/lib/docker/overlay2/l | wc -l; cat /var/lib/docker/mine' \
	>"$work/pool.json"
python3 - "$work/pool.json" <<'PY' || cat "$work/pool.json"
import json, sys
r = json.load(open(sys.argv[1]))
for e in r["episodes"]:
    out = " ".join(str(e.get("stdout", "")).split())
    print(f'   episode {e.get("episode")}: exit {e.get("exit_code")}, reset {e.get("reset_ms", 0):.2f} ms, '
          f'ready {e.get("ready_ms", 0):.0f} ms, teardown {e.get("teardown_ms", 0):.1f} ms: {out}')
m = r["summary"]
print(f'   {m["episodes"]} episodes, {m["failed"]} failed, {m["episodes_per_minute"]:.0f} per minute; '
      f'p50 reset {m["reset"]["p50_ms"]:.2f} ms, ready {m["ready"]["p50_ms"]:.0f} ms, teardown {m["teardown"]["p50_ms"]:.1f} ms')
PY
echo "== golden volume unchanged and clean after the episodes:"
vol fsck "$golden"
echo "== done"
