#!/usr/bin/env bash
# Start-up latency of one episode: `rungv run IMG true` (EROFS rootfs from
# the cache, userns supervisor, self-lockdown) against `runsc do true`
# (runsc's quickest path: the host's / through a gofer), side by side. The
# runsc is the one embedded in rungv (`rungv do …` is runsc do), so both
# use the same gVisor build. The image is the busybox test image made from
# the host's static busybox; the rootfs cache is warmed once first.
#
# usage: bench/start.sh [RUNS]   (default 30; hyperfine if installed and
# NO_HYPERFINE is unset, else a loop reporting the median; root runs the
# rootless variant too, as nobody, via setpriv)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-30}
work=$(mktemp -d /var/tmp/gvx-start-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
CGO_ENABLED=0 go build -o "$work/rungv" ./cmd/rungv
CGO_ENABLED=0 go run ./runtime/runtimetest/mk "$work/image"
chmod -R a+rX "$work"
export GVX_CACHE_DIR=$work/cache
mkdir "$GVX_CACHE_DIR"
bin=$work/rungv
img=oci:$work/image
"$bin" run "$img" true # warm the rootfs cache

echo "== $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) (other work skews every number below)"
cmds=("$bin run --network none $img true" "$bin run --network nat $img true" "$bin run --network none -p unix:$work/p.sock:80 $img true")
names=("rungv run IMG true" "rungv run --network nat IMG true" "rungv run -p unix:SOCK:80 IMG true")
if [ "$(id -u)" = 0 ]; then
	cmds+=("$bin --network=none --ignore-cgroups do true")
	names+=("runsc do true")
	if command -v setpriv >/dev/null; then
		mkdir "$work/cache-nobody" && chown 65534:65534 "$work/cache-nobody"
		nobody="env GVX_CACHE_DIR=$work/cache-nobody setpriv --reuid=65534 --regid=65534 --clear-groups"
		$nobody "$bin" run "$img" true # warm nobody's cache
		cmds+=("$nobody $bin run --network none $img true")
		names+=("rungv run IMG true (as nobody)")
	fi
else
	cmds+=("$bin --rootless --network=none --ignore-cgroups do true")
	names+=("runsc --rootless do true")
fi

if command -v hyperfine >/dev/null && [ -z "${NO_HYPERFINE:-}" ]; then
	args=()
	for i in "${!cmds[@]}"; do args+=(-n "${names[$i]}" "${cmds[$i]}"); done
	hyperfine -N -w 3 -r "$runs" "${args[@]}" --export-markdown "$work/start.md" --export-json "$work/start.json" >&2
	cat "$work/start.md"
	if command -v python3 >/dev/null; then
		python3 -c 'import json,sys
for r in json.load(open(sys.argv[1]))["results"]:
    print("%-34s median %6.1f ms of %d" % (r["command"], r["median"]*1000, len(r["times"])))' "$work/start.json"
	fi
	exit 0
fi
for i in "${!cmds[@]}"; do
	ts=()
	for _ in $(seq "$runs"); do
		s=$(date +%s%N)
		${cmds[$i]} >/dev/null
		ts+=($(( ($(date +%s%N) - s) / 1000 )))
	done
	med=$(printf '%s\n' "${ts[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	printf '%-34s median %6.1f ms of %d\n' "${names[$i]}" "$(echo "$med / 1000" | bc -l)" "$runs"
done
