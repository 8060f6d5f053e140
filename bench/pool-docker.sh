#!/usr/bin/env bash
# Docker episodes: the reflink way against the slow way, side by side.
#
# Builds the Docker daemon image and two workload images locally
# (image/dindtest: debootstrap bookworm + docker.io, cached after the first
# run), a golden /var/lib/docker with `gvx-vol build-golden` on a
# loop-mounted XFS (mkfs.xfs -m reflink=1), then runs `rungv pool` at 1, 4
# and 8 episodes in parallel. Each episode starts its own dockerd on its own
# clone, and is ready once `docker info` answers; it then `docker run`s both
# preloaded images. Reported per parallelism: reset (clone) latency, ready
# latency (clone done → docker info answers), teardown latency, unshared
# bytes per clone, episodes per minute.
#
# The slow way, same workload and parallelism: every episode starts from an
# empty volume, and is ready once its daemon answers AND both images are
# loaded again (`docker load` of the tars), as a fresh daemon without a
# golden volume would be.
#
# usage: sudo bench/pool-docker.sh [EPISODES]   (default 16 per parallelism)
# Env: JOBS="1 4 8". Needs xfsprogs, debootstrap, go, jq; ~2 GiB in /var/tmp.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-16}
jobs=${JOBS:-1 4 8}
[ "$(id -u)" = 0 ] || { echo "bench/pool-docker.sh: needs root (debootstrap, loop-mounted XFS)" >&2; exit 1; }
for t in mkfs.xfs mount umount go jq debootstrap; do
	command -v "$t" >/dev/null || { echo "bench/pool-docker.sh: needs $t" >&2; exit 1; }
done

work=$(mktemp -d /var/tmp/gvx-pool-docker.XXXXXX)
mnt=$work/mnt
cleanup() {
	dind_unmount
	rm -rf "$work"
}
trap cleanup EXIT
. bench/dindbench.sh

echo "== $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine skews every number)"
dind_setup 32G

t0=$(date +%s%N)
"$gvx" build-golden -q --daemon-image "$image" --load "$work/tars/hello.tar" --load "$work/tars/tools.tar" \
	--daemon-arg=--iptables=false --daemon-arg=--ip6tables=false --size 8G "$mnt/golden.ext4"
echo "== golden volume (build-golden, 2 images): $(( ($(date +%s%N) - t0) / 1000000 )) ms, once"
"$gvx" create --size 8G "$mnt/empty.ext4" >/dev/null 2>&1
sum0=$(sha256sum "$mnt/golden.ext4" | cut -d' ' -f1)

daemon='dockerd-entrypoint.sh --iptables=false --ip6tables=false --host=unix:///var/run/docker.sock >/tmp/dockerd.log 2>&1 &
until docker info >/dev/null 2>&1; do sleep 0.05; done'
workload='docker run --rm --network=none hello:latest true && docker run --rm --network=none tools:latest cat /etc/gvx-image >/dev/null'
fast="$daemon; echo ready; $workload"
slow="$daemon; docker load -q -i /tars/hello.tar >/dev/null && docker load -q -i /tars/tools.tar >/dev/null; echo ready; $workload"

run_pool() { # $1: golden, $2: -j, $3: script, $4: episodes, $5: json out
	"$rungv" pool --golden "$1" --scratch "$mnt/eps" -n "$4" -j "$2" --ready ready --timeout 5m --json \
		--mount "type=bind,src=$work/tars,dst=/tars,readonly" -e DOCKER_TLS_CERTDIR= \
		--entrypoint sh "$image" -c "$3" >"$5" || { jq '.episodes[] | select(.error)' "$5"; exit 1; }
}
row() { # $1: -j, $2: json
	jq -r --arg j "$1" '.summary | [$j,
		"\(.reset.p50_ms)/\(.reset.p95_ms)", "\(.ready.p50_ms|floor)/\(.ready.p95_ms|floor)",
		"\(.teardown.p50_ms)/\(.teardown.p95_ms)", "\(.allocated_bytes_p50/1024|floor) KiB",
		(.episodes_per_minute|floor)] | @tsv' "$2" |
		awk -F'\t' '{printf "%-4s %16s %16s %16s %12s %8s\n", $1, $2, $3, $4, $5, $6}'
}

for way in reflink slow; do
	if [ $way = reflink ]; then
		printf '\n== reflink way: a clone of the golden volume, %d episodes each (ms; p50/p95)\n' "$n"
		golden=$mnt/golden.ext4 script=$fast
	else
		printf '\n== slow way: an empty volume, both images loaded again, %d episodes each (ms; p50/p95)\n' "$n"
		golden=$mnt/empty.ext4 script=$slow
	fi
	printf '%-4s %16s %16s %16s %12s %8s\n' "-j" "reset" "ready" "teardown" "unshared" "ep/min"
	for j in $jobs; do
		run_pool "$golden" "$j" "$script" "$n" "$work/$way-$j.json"
		row "$j" "$work/$way-$j.json"
	done
done
[ "$(sha256sum "$mnt/golden.ext4" | cut -d' ' -f1)" = "$sum0" ] || { echo "bench/pool-docker.sh: the golden volume changed!" >&2; exit 1; }
left=$( (find "$mnt/eps" -name "ep-*" 2>/dev/null || true) | wc -l) # the pool removes the dir it made
[ "$left" = 0 ] || { echo "bench/pool-docker.sh: $left files left in the scratch dir" >&2; exit 1; }
echo "   golden unchanged (sha256), scratch dir empty"
