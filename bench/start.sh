#!/usr/bin/env bash
# Start-up latency of one episode: `rungv run IMG true` (EROFS rootfs from
# the cache, userns supervisor, self-lockdown) against `runsc do true`
# (runsc's quickest path: the host's / through a gofer), side by side. The
# runsc is the one embedded in rungv (`rungv do …` is runsc do), so both
# use the same gVisor build. The image is the busybox test image made from
# the host's static busybox; the rootfs cache is warmed once first.
#
# Each isolation mode gets its rows: the namespace path (user, network and
# PID namespaces, supervisor and init) and seccomp-only (the sandbox started
# directly, as in an unprivileged pod), with the ratio of their medians.
# With a Docker-in-the-episode image (DIND=DIR, an OCI layout such as
# image/dindtest's, found in the caller's test cache, $GVX_TEST_CACHE or
# /var/tmp/gvx-test-cache-UID, when unset) and the
# docker CLI, it also times "dockerd ready" (start to docker info
# answering through -p unix:) in each mode.
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
cmds=("$bin run --network none $img true" "$bin run --network nat $img true" "$bin run --network none -p unix:$work/p.sock:80 $img true"
	"$bin run --isolation seccomp-only --network none $img true" "$bin run --isolation seccomp-only --network nat $img true")
names=("rungv run IMG true" "rungv run --network nat IMG true" "rungv run -p unix:SOCK:80 IMG true"
	"seccomp-only: rungv run IMG true" "seccomp-only: --network nat IMG true")
if [ "$(id -u)" = 0 ]; then
	cmds+=("$bin --network=none --ignore-cgroups do true")
	names+=("runsc do true")
	if command -v setpriv >/dev/null; then
		mkdir "$work/cache-nobody" && chown 65534:65534 "$work/cache-nobody"
		nobody="env GVX_CACHE_DIR=$work/cache-nobody setpriv --reuid=65534 --regid=65534 --clear-groups"
		$nobody "$bin" run "$img" true # warm nobody's cache
		cmds+=("$nobody $bin run --network none $img true" "$nobody $bin run --isolation seccomp-only --network none $img true")
		names+=("rungv run IMG true (as nobody)" "seccomp-only: IMG true (as nobody)")
	fi
else
	cmds+=("$bin --rootless --network=none --ignore-cgroups do true")
	names+=("runsc --rootless do true")
fi

# dockerd ready in each mode: start to `docker info` answering.
dind_ready() { # mode → milliseconds
	local sock=$work/d-$1.sock vol=$work/d-$1.ext4 s pid
	rm -f "$vol"
	s=$(date +%s%N)
	"$bin" run --isolation "$1" -p "unix:$sock:2375" -e DOCKER_TLS_CERTDIR= \
		--mount "type=volume,src=$vol,dst=/var/lib/docker,size=4G" "oci:$DIND" --tls=false >/dev/null 2>&1 &
	pid=$!
	until docker -H "unix://$sock" info >/dev/null 2>&1; do sleep 0.02; done
	echo $(( ($(date +%s%N) - s) / 1000000 ))
	kill -INT $pid; wait $pid || true
}
dind_rows() {
	[ -n "${DIND:-}" ] || DIND=$(ls -d "${GVX_TEST_CACHE:-/var/tmp/gvx-test-cache-$(id -u)}"/dind-* 2>/dev/null | grep -v '\.lock$' | grep -v sid | head -1 || true)
	[ -n "$DIND" ] && [ -f "$DIND/index.json" ] && command -v docker >/dev/null || return 0
	"$bin" run --network none "oci:$DIND" true >/dev/null 2>&1 || true # warm the cache
	local mode med ns=
	for mode in namespaces seccomp-only; do
		local ts=()
		for _ in 1 2 3 4 5; do ts+=("$(dind_ready $mode)"); done
		med=$(printf '%s\n' "${ts[@]}" | sort -n | sed -n 3p)
		printf '%-34s median %6d ms of 5\n' "dockerd ready ($mode)" "$med"
		if [ -z "$ns" ]; then ns=$med; else printf '%-34s %.2f\n' "  seccomp-only / namespaces" "$(echo "$med / $ns" | bc -l)"; fi
	done
}

ratio() { # the seccomp-only rows against the namespace rows, from "name median X ms" lines
	awk '/median/ { for (i = 1; i <= NF; i++) if ($i == "median") v = $(i+1); n = $0; sub(/ +median.*/, "", n); m[n] = v }
	END {
		if (m["rungv run IMG true"] && m["seccomp-only: rungv run IMG true"]) printf "%-34s %.2f\n", "seccomp-only / namespaces (true)", m["seccomp-only: rungv run IMG true"] / m["rungv run IMG true"]
		if (m["rungv run --network nat IMG true"] && m["seccomp-only: --network nat IMG true"]) printf "%-34s %.2f\n", "seccomp-only / namespaces (nat)", m["seccomp-only: --network nat IMG true"] / m["rungv run --network nat IMG true"]
	}'
}

if command -v hyperfine >/dev/null && [ -z "${NO_HYPERFINE:-}" ]; then
	args=()
	for i in "${!cmds[@]}"; do args+=(-n "${names[$i]}" "${cmds[$i]}"); done
	hyperfine -N -w 3 -r "$runs" "${args[@]}" --export-markdown "$work/start.md" --export-json "$work/start.json" >&2
	cat "$work/start.md"
	if command -v python3 >/dev/null; then
		python3 -c 'import json,sys
for r in json.load(open(sys.argv[1]))["results"]:
    print("%-34s median %6.1f ms of %d" % (r["command"], r["median"]*1000, len(r["times"])))' "$work/start.json" | tee "$work/rows" && ratio <"$work/rows"
	fi
	dind_rows
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
done | tee "$work/rows"
ratio <"$work/rows"
dind_rows
