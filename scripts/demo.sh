#!/usr/bin/env bash
# The main job on an embedded default, no registry or internet needed:
#  1. build gvx-vol and rungv;
#  2. make the images locally: a Docker daemon image (Debian bookworm +
#     docker.io, by debootstrap from this host's apt mirror; cached in
#     /var/tmp/gvx-test-cache-UID after the first run, verified on every
#     use, and copied out so that nothing done to the demo's copy reaches
#     the cache) and two small workload
#     images (Debian's busybox-static) as docker-archive tars;
#  3. add the daemon image to the EROFS image cache;
#  4. gvx-vol build-golden: run dockerd in a gVisor sandbox on a new
#     ext4lite volume, docker load both images, stop, compact, publish;
#     check the golden volume with e2fsck and gvx-vol fsck;
#  5. reset episodes from it by reflink clone (on a loop-mounted XFS);
#  6. rungv pool: N episodes, 4 at a time, each its own dockerd on its own
#     clone, docker run of both preloaded images, a write of its own; print
#     the pool's reset / ready / teardown latencies; then again with 4 kept
#     warm (the claim latency); and check that the golden
#     volume did not change.
#
# Root is needed for debootstrap and the loop-mounted XFS. Without root the
# demo runs the same pipeline with busybox episodes (no Docker inside) on
# sparse copies.
#
# usage: scripts/demo.sh [EPISODES]   (default 8)
set -euo pipefail
cd "$(dirname "$0")/.."
episodes=${1:-8}
export CGO_ENABLED=0 PATH=/usr/local/go/bin:$PATH
root=false
[ "$(id -u)" = 0 ] && root=true

need_pkgs=()
command -v e2fsck >/dev/null || need_pkgs+=(e2fsprogs)
[ -x /bin/busybox ] || need_pkgs+=(busybox-static)
command -v mkfs.xfs >/dev/null || need_pkgs+=(xfsprogs)
$root && ! command -v debootstrap >/dev/null && need_pkgs+=(debootstrap)
if [ ${#need_pkgs[@]} -gt 0 ]; then
	if $root && command -v apt-get >/dev/null; then
		echo "== installing ${need_pkgs[*]}"
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
	else
		echo "demo: please install: ${need_pkgs[*]}" >&2
		exit 1
	fi
fi

work=$(mktemp -d /var/tmp/gvx-demo.XXXXXX)
chmod 755 "$work"
mnt=$work/xfs
cleanup() {
	mountpoint -q "$mnt" 2>/dev/null && umount "$mnt"
	rm -rf "$work"
}
trap cleanup EXIT
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
export GVX_CACHE=$work/cache

echo "== building gvx-vol"
go build -o "$work/" ./cmd/gvx-vol/... # gvx-vol and gvx-vol-tools beside it
echo "== building rungv (embeds gVisor's runsc; the first build takes a minute or two)"
go build -o "$work/rungv" ./cmd/rungv
export GVX_RUNGV=$work/rungv
vol() { "$work/gvx-vol" "$@"; }

dest=$work/episodes
mode=auto
if $root; then
	echo "== reflink filesystem: a loop-mounted XFS"
	truncate -s 16G "$work/xfs.img"
	mkfs.xfs -q -m reflink=1 "$work/xfs.img"
	mkdir -p "$mnt"
	mount -o loop,nosuid,nodev "$work/xfs.img" "$mnt"
	dest=$mnt/episodes
	mode=always
	golden=$mnt/golden.ext4
else
	echo "== not root: episodes are sparse copies (clone needs a reflink filesystem such as XFS or Btrfs)"
	golden=$work/golden.ext4
fi
mkdir -p "$dest"

if $root; then
	echo "== images: the Docker daemon image (debootstrap bookworm + docker.io; minutes the first time, then cached in ${GVX_TEST_CACHE:-/var/tmp/gvx-test-cache-$(id -u)})"
	t=$(date +%s%N)
	go run ./image/dindtest/mkdind -hello "$work/hello.tar" -tagged "tools:latest=$work/tools.tar" "$work/dind" >/dev/null
	echo "   daemon image and two workload images (hello:latest, tools:latest): $(ms "$t") ms"
	t=$(date +%s%N)
	vol image add --json "oci:$work/dind" >"$work/image.json"
	echo "   EROFS cache: $(ms "$t") ms -> $(grep -o '"erofs": *"[^"]*"' "$work/image.json" | cut -d'"' -f4)"

	echo "== golden volume: dockerd in a sandbox loads both images (gvx-vol build-golden)"
	t=$(date +%s%N)
	vol build-golden --daemon-image "oci:$work/dind" --load "$work/hello.tar" --load "$work/tools.tar" \
		--daemon-arg=--iptables=false --daemon-arg=--ip6tables=false --size 8G --json "$golden" >"$work/golden.json"
	echo "   build-golden: $(ms "$t") ms"
	python3 - "$work/golden.json" <<'PY' || cat "$work/golden.json"
import json, sys
r = json.load(open(sys.argv[1]))
for i in r["images"]:
    print(f'   image {i["ref"]} {i["id"][:19]}')
print(f'   volume: {r["used_bytes"]/2**20:.0f} MiB used, {r["allocated_bytes"]/2**20:.1f} MiB allocated of {r["size_bytes"]/2**30:.0f} GiB')
PY
	image="oci:$work/dind"
	ready="ready"
	# Each episode: its own dockerd on its own clone (guest socket only:
	# a TLS-less tcp listener makes dockerd 20.10 wait 15 s), both
	# preloaded images run without loading them again, a write of its own.
	script='dockerd-entrypoint.sh --iptables=false --ip6tables=false --host=unix:///var/run/docker.sock >/tmp/dockerd.log 2>&1 &
until docker info >/dev/null 2>&1; do sleep 0.1; done; echo ready
docker run --rm --network=none hello:latest echo "hello from episode $GVX_EPISODE" &&
docker run --rm --network=none tools:latest cat /etc/gvx-image &&
docker tag hello:latest "mine:ep$GVX_EPISODE" &&
echo "images: $(docker images --format "{{.Repository}}:{{.Tag}}" | sort | tr "\n" " ")"'
else
	echo "== base image: busybox as an OCI layout, added to the EROFS cache"
	go build -o "$work/mkbusybox" ./runtime/runtimetest/mk
	"$work/mkbusybox" "$work/busybox-oci"
	vol image add --json "oci:$work/busybox-oci" >/dev/null
	echo "== golden volume: a 4 GiB ext4lite file holding a docker-like tree"
	mkdir -p "$work/tree/overlay2/l" "$work/tree/image/overlay2" "$work/tree/containers"
	for i in $(seq 1 2000); do echo "layer file $i" >"$work/tree/overlay2/l/f$i"; done
	vol create --size 4G --from "$work/tree" "$golden"
	image="oci:$work/busybox-oci"
	ready="episode"
	script='echo "episode $GVX_EPISODE" >/var/lib/docker/mine; echo "layer files: $(ls /var/lib/docker/overlay2/l | wc -l)"; cat /var/lib/docker/mine'
fi
e2fsck -fn "$golden" >/dev/null 2>&1 && echo "   e2fsck -fn: clean"
vol fsck "$golden"
vol info "$golden"
sum=$(sha256sum "$golden" | cut -d' ' -f1)

echo "== resetting $episodes episodes (gvx-vol clone --reflink=$mode)"
vol clone --reflink=$mode --count "$episodes" --json "$golden" "$dest/ep-%04d.ext4" >"$work/clones.json"
python3 - "$work/clones.json" <<'PY' 2>/dev/null || cat "$work/clones.json"
import json, sys
r = json.load(open(sys.argv[1]))
lat = sorted(c["latency_ms"] for c in r["clones"])
print(f'   {len(lat)} clones ({r["clones"][0]["method"]}, {sum(c["copied"] for c in r["clones"])} bytes copied): '
      f'median {lat[len(lat)//2]:.2f} ms, max {lat[-1]:.2f} ms')
PY
vol fsck "$dest/ep-0000.ext4"
rm -f "$dest"/ep-*.ext4

echo "== $episodes episodes in gVisor sandboxes, 4 at a time (rungv pool)"
"$work/rungv" pool --golden "$golden" --scratch "$dest" -n "$episodes" -j 4 --clone "$mode" --ready "$ready" --network none \
	--timeout 5m --json -e DOCKER_TLS_CERTDIR= --entrypoint sh "$image" -c "$script" >"$work/pool.json" || true
python3 - "$work/pool.json" <<'PY' || { cat "$work/pool.json"; exit 1; }
import json, sys
r = json.load(open(sys.argv[1]))
for e in r["episodes"]:
    out = " | ".join(l for l in str(e.get("stdout", "")).splitlines() if l.strip())
    err = f' ERROR {e["error"]}' if e.get("error") else ""
    print(f'   episode {e.get("episode")}: exit {e.get("exit_code")}, reset {e.get("reset_ms", 0):.2f} ms, '
          f'ready {e.get("ready_ms", 0):.0f} ms, teardown {e.get("teardown_ms", 0):.1f} ms: {out}{err}')
m = r["summary"]
print(f'   {m["episodes"]} episodes, {m["failed"]} failed, {m["episodes_per_minute"]:.0f} per minute; '
      f'p50 reset {m["reset"]["p50_ms"]:.2f} ms, ready {m["ready"]["p50_ms"]:.0f} ms, teardown {m["teardown"]["p50_ms"]:.1f} ms')
sys.exit(1 if m["failed"] else 0)
PY
echo "== the same with 4 episodes kept warm (rungv pool --warm 4: booted ahead of demand, each episode a claim)"
"$work/rungv" pool --golden "$golden" --scratch "$dest" -n "$episodes" -j 4 --warm 4 --clone "$mode" --ready "$ready" --network none \
	--timeout 5m --json -e DOCKER_TLS_CERTDIR= --entrypoint sh "$image" -c "$script" >"$work/warm.json" || true
python3 - "$work/warm.json" <<'PY' || { cat "$work/warm.json"; exit 1; }
import json, sys
m = json.load(open(sys.argv[1]))["summary"]
print(f'   {m["episodes"]} episodes, {m["failed"]} failed; claim (asked for → a ready daemon handed over) '
      f'p50 {m["claim"]["p50_ms"]:.3f} ms, max {m["claim"]["max_ms"]:.3f} ms; the boot behind it (ready) {m["ready"]["p50_ms"]:.0f} ms')
print('   (ready: how long each replacement took to boot, in the background, off every claim\'s path: it waits out the refill')
print('   delay and runs at low CPU priority behind the claims, several at once, so it is slower than a cold boot; no claim waits for it)')
sys.exit(1 if m["failed"] else 0)
PY
echo "== golden volume after the episodes:"
[ "$(sha256sum "$golden" | cut -d' ' -f1)" = "$sum" ] && echo "   sha256 unchanged"
vol fsck "$golden"
echo "== done"
