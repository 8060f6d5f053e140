#!/usr/bin/env bash
# A real task in an episode (issue 25, item 1), gvx against a host dockerd:
# a Python project (bench/taskproject: Dockerfile FROM a preloaded
# Debian+python3+pytest+redis-client image, compose.yaml with redis (a
# healthcheck) and app, 30 pytest tests talking to both by service name),
# per episode: create → upload → docker compose up -d --build → wait
# healthy → compose run app pytest → edit a file → rebuild → tests again →
# logs → close; N episodes at once for each N given (default 1 4 8), both
# sides in the same run.
#
#   gvx:  `rungv serve` and the Python client (clients/python), each episode
#         created from a reflink clone of a golden volume (gvx-vol
#         build-golden --load of both images) with dockerd as its service
#         (image/dindtest's sid flavour: Docker 28.5.2, Compose 2.40.3, inside
#         the episode); every docker command runs inside the episode.
#   host: one Debian docker.io dockerd (this host's; its own containerd,
#         --data-root, --exec-root, socket and config under the scratch dir,
#         in a network namespace of its own, --iptables=false, containers
#         under a cgroup of its own), the same two images loaded from the
#         same tarballs, driven by the same docker CLI and Compose plugin
#         (copied out of the sid image); each episode a compose project of
#         its own, closed with `down -v --rmi local`.
#
# The images are made here, no registry: bench/taskimg debootstraps them
# from the host's Debian mirror (as image/dindtest finds it) and caches
# them, digest-checked, in /var/tmp/gvx-bench-cache-UID.
# CPU: each side runs in its own cpuacct cgroup (rungv serve and all its
# episodes; dockerd, containerd, shims, containers, the CLI): usage over
# each round, per episode.
#
# usage: sudo bench/task.sh [N...]     (default: 1 4 8)
# Env: PROFILE=1 also records `perf record -a -g` over one more gvx episode
# (N=1) and prints where its CPU went; SIDES="gvx host" (either alone);
# TASK_PHASE_TIMEOUT=900 (seconds per phase); TASK_IDLE=S adds a phase
# "idle" after healthy: S seconds of the healthy project doing nothing but
# its two healthchecks, and the table's "CPU s per idle second" at N=1 (what
# every episode pays per second it lives); PIN=MODE runs rungv serve with
# --pin-cpus MODE (packed, its default: each gvx episode on one host CPU,
# spread, once they are as many as the CPUs; always; never); SENTRY_PROFILE=DIR profiles
# every gvx episode's Sentry into DIR (rungv's RUNGV_PROFILE_DIR: one
# <episode id>.cpu.pprof each, read with `go tool pprof -top -cum FILE`;
# it loosens the Sentry's seccomp filter and the profiler costs a little CPU
# too), and the volume server's request counters (<id>.volume-N.json), which
# taskbench.py reports per phase at N=1 (rpc_phases; "volume RPCs" rows;
# the seccomp-only mode only: the namespaced gofer logs its final counters
# to its runsc log instead). GOLDEN_DURABILITY=full mounts the gvx
# episodes' golden clones with durability=full (serve's
# golden_durability; its default is episode). GVX_DAEMON_ARGS="--iptables=false
# --ip6tables=false --bridge=none" gives the gvx episodes' dockerd the host
# side's network flags (space-separated, no quoting; default: none, Docker's
# defaults, as a user's dockerd-entrypoint.sh runs it). PATCHES=0 builds
# rungv on upstream gVisor (default: with gvx's patch series, as
# scripts/build.sh does; before 2026-12-06 23:00 it built upstream's).
# Writes the raw numbers as
# JSON to $TASK_JSON (default ./task-bench.json). ~3 GiB in /var/tmp.
set -euo pipefail
cd "$(dirname "$0")/.."
ns=("$@")
[ ${#ns[@]} -gt 0 ] || ns=(1 4 8)
for n in "${ns[@]}"; do
	[[ $n =~ ^[1-9][0-9]?$ ]] || { echo "bench/task.sh: N must be 1..99, got '$n'" >&2; exit 2; }
done
sides=${SIDES:-gvx host}
[ "$(id -u)" = 0 ] || { echo "bench/task.sh: needs root (debootstrap, loop mounts, cgroups, the host dockerd)" >&2; exit 1; }
for t in go jq python3 mkfs.xfs mount umount unshare ip debootstrap dockerd containerd; do
	command -v "$t" >/dev/null || { echo "bench/task.sh: needs $t" >&2; exit 1; }
done
cpuacct=$(awk '$3 == "cgroup" && $4 ~ /(^|,)cpuacct(,|$)/ {print $2; exit}' /proc/mounts)
[ -n "$cpuacct" ] || { echo "bench/task.sh: needs a cgroup v1 cpuacct hierarchy (this host has none mounted)" >&2; exit 1; }
json_out=$(realpath -m "${TASK_JSON:-task-bench.json}")

work=$(mktemp -d /var/tmp/gvx-task-bench.XXXXXX)
mnt=$work/mnt
tag=gvxtask-$$
cg_gvx=$cpuacct/$tag-gvx cg_host=$cpuacct/$tag-host
serve_pid= dockerd_pid= containerd_pid=
stop_pid() { # PID: TERM, then KILL after 30 s
	[ -n "$1" ] && kill -0 "$1" 2>/dev/null || return 0
	kill "$1" 2>/dev/null || true
	for _ in $(seq 300); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
	kill -9 "$1" 2>/dev/null || true
}
cleanup() {
	set +e
	stop_pid "$serve_pid"
	stop_pid "$dockerd_pid"
	stop_pid "$containerd_pid"
	# what the host dockerd's containers left: mounts under the scratch
	# dir, cgroups under ours in every hierarchy
	grep -o " $work/[^ ]*" /proc/mounts 2>/dev/null | sort -r | while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
	for _ in $(seq 50); do # the last processes may take a moment to leave
		left=
		for d in /sys/fs/cgroup/*/"$tag"-*; do
			[ -d "$d" ] && { find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null; [ -d "$d" ] && left=$d; }
		done
		[ -z "$left" ] && break
		sleep 0.1
	done
	[ -z "$left" ] || echo "bench/task.sh: cgroup $left still has processes: $(cat "$left/cgroup.procs" | tr '\n' ' ')" >&2
	umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

echo "== $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), load average $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine skews every number)"
export CGO_ENABLED=0
# rungv with gvx's gVisor patch series (docs/gvisor-patches.md), as
# scripts/build.sh builds it; PATCHES=0 builds upstream gVisor.
if [ "${PATCHES:-1}" != 0 ]; then eval "$(GOWORK=off go run ./cmd/gvisorpatch env)"; fi
go build -o "$work/rungv" ./cmd/rungv
go build -o "$work/" ./cmd/gvx-vol
go build -o "$work/taskimg" ./bench/taskimg
rungv=$work/rungv gvx=$work/gvx-vol
go run ./image/dindtest/mkdind -flavour sid "$work/dind" >/dev/null
image=oci:$work/dind
"$work/taskimg" -cli "$work/dind" "$work/cli"
mkdir "$work/tars"
"$work/taskimg" "$work/tars"
export GVX_CACHE_DIR=$work/cache GVX_CACHE=$work/cache GVX_RUNGV=$rungv
"$gvx" image add "$image" >/dev/null
truncate -s 64G "$work/xfs.img"
mkfs.xfs -q -m reflink=1 "$work/xfs.img"
mkdir "$mnt"
mount -o loop,nosuid,nodev "$work/xfs.img" "$mnt"
if [[ " $sides " == *" gvx "* ]]; then
	echo "== golden volume: sid dockerd + taskbench/pybase:1 + taskbench/redis:1"
	"$gvx" build-golden -q --daemon-image "$image" --load "$work/tars/pybase.tar" --load "$work/tars/redis.tar" \
		--daemon-arg=--iptables=false --daemon-arg=--ip6tables=false --size 16G "$mnt/golden.ext4"
	gstat() { stat -c '%s %Y.%y %Z.%z %i' "$mnt/golden.ext4"; } # a write changes mtime/ctime (hashing 16 GiB took minutes)
	sum0=$(gstat)
fi
mkdir "$cg_gvx" "$cg_host" "$mnt/st" "$mnt/host"
# $join CG CMD...: runs CMD in cgroup CG (its children stay there). Not
# a function: `f … &` forks a subshell, and $! would name it, not CMD
# (cleanup then killed the subshell and left the daemons running).
join=(sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"')

if [[ " $sides " == *" gvx "* ]]; then
	if [ -n "${SENTRY_PROFILE:-}" ]; then
		mkdir -p "$SENTRY_PROFILE"
		export RUNGV_PROFILE_DIR=$(realpath "$SENTRY_PROFILE")
		echo "== Sentry profiles in $RUNGV_PROFILE_DIR (go tool pprof -top -cum FILE)"
	fi
	"${join[@]}" "$cg_gvx" "$rungv" serve --state-dir "$mnt/st" --clone auto --max-episodes 99 --ttl 2h -q ${PIN:+--pin-cpus "$PIN"} >"$work/hello" 2>"$work/serve.log" &
	serve_pid=$!
	for _ in $(seq 300); do [ -s "$work/hello" ] && break; sleep 0.1; done
	sock=$(jq -r .socket "$work/hello")
	[ -S "$sock" ] || { echo "bench/task.sh: rungv serve did not start:" >&2; cat "$work/serve.log" >&2; exit 1; }
fi
if [[ " $sides " == *" host "* ]]; then
	h=$mnt/host
	mkdir -p "$h/data" "$h/exec" "$h/ctrd/root" "$h/ctrd/state" "$h/scratch"
	echo '{}' >"$h/daemon.json" # not the host's /etc/docker/daemon.json
	cat >"$h/containerd.toml" <<-EOF
		version = 2
		root = "$h/ctrd/root"
		state = "$h/ctrd/state"
		disabled_plugins = ["io.containerd.grpc.v1.cri"]
		[grpc]
		  address = "$h/containerd.sock"
		[ttrpc]
		  address = "$h/containerd.sock.ttrpc"
		[debug]
		  address = ""
		[metrics]
		  address = ""
	EOF
	"${join[@]}" "$cg_host" containerd --config "$h/containerd.toml" >"$h/containerd.log" 2>&1 &
	containerd_pid=$!
	for _ in $(seq 300); do [ -S "$h/containerd.sock" ] && break; sleep 0.1; done
	# dockerd in a network namespace of its own: its bridges and its
	# containers' networks never touch the host's.
	"${join[@]}" "$cg_host" unshare --net sh -c 'ip link set lo up && exec "$@"' sh \
		dockerd --config-file "$h/daemon.json" --containerd "$h/containerd.sock" \
		--data-root "$h/data" --exec-root "$h/exec" --pidfile "$h/docker.pid" -H "unix://$h/docker.sock" \
		--iptables=false --ip6tables=false --bridge=none --cgroup-parent "/$tag-host" >"$h/dockerd.log" 2>&1 &
	dockerd_pid=$!
	hdocker() { DOCKER_CONFIG=$work/cli/config "$work/cli/docker" -H "unix://$h/docker.sock" "$@"; }
	for _ in $(seq 600); do hdocker info >/dev/null 2>&1 && break; sleep 0.1; done
	hdocker info >/dev/null || { echo "bench/task.sh: the host dockerd did not start:" >&2; tail -20 "$h/dockerd.log" >&2; exit 1; }
	hdocker load -q -i "$work/tars/pybase.tar" >/dev/null
	hdocker load -q -i "$work/tars/redis.tar" >/dev/null
	echo "== host: $(hdocker version -f 'dockerd {{.Server.Version}}, client {{.Client.Version}}'), compose $(hdocker compose version --short)"
fi

export PYTHONPATH=$PWD/clients/python PYTHONDONTWRITEBYTECODE=1
daemon_args=()
for a in ${GVX_DAEMON_ARGS:-}; do daemon_args+=(--daemon-arg="$a"); done
drive() { # SIDE N → one JSON line
	case $1 in
	gvx) python3 bench/taskbench.py gvx --n "$2" --project bench/taskproject --cgroup "$cg_gvx" ${GOLDEN_DURABILITY:+--golden-durability "$GOLDEN_DURABILITY"} \
		--socket "$sock" --image "$image" --golden "$mnt/golden.ext4" "${daemon_args[@]}" ;;
	host) python3 bench/taskbench.py host --n "$2" --project bench/taskproject --cgroup "$cg_host" \
		--docker-host "unix://$h/docker.sock" --cli-dir "$work/cli" --scratch "$h/scratch" ;;
	esac
}
if [[ " $sides " == *" gvx "* ]]; then
	echo "== warm-up: one gvx episode (untimed)"
	drive gvx 1 | jq -c '{failed, whole: .episodes[0].whole, error: .episodes[0].error}'
fi
: >"$work/results.jsonl"
for n in "${ns[@]}"; do
	for side in $sides; do
		echo "== $side, $n at once"
		drive "$side" "$n" | tee -a "$work/results.jsonl" | jq -c '{side, n, wall_s, cpu_per_episode_s, failed, errors: [.episodes[].error // empty | .[0:300]]}'
	done
done

if [ "${PROFILE:-0}" = 1 ] && [[ " $sides " == *" gvx "* ]]; then
	echo "== profile: perf record -a -g over one gvx episode"
	if command -v perf >/dev/null && perf record -o "$work/perf.probe" -a -- sleep 0.1 >/dev/null 2>&1; then
		perf record -q -o "$work/perf.data" -a -g -F 499 -- python3 bench/taskbench.py gvx --n 1 --project bench/taskproject \
			--cgroup "$cg_gvx" --socket "$sock" --image "$image" --golden "$mnt/golden.ext4" >"$work/profiled.json" 2>"$work/perf.log" || true
		perf report -i "$work/perf.data" --no-children --sort comm --stdio -g none 2>/dev/null | grep -v '^#' | grep . | head -15 || true
		perf report -i "$work/perf.data" --no-children --sort comm,dso,sym --stdio -g none 2>/dev/null | grep -v '^#' | grep . | head -40 || true
	else
		echo "   skipped: perf cannot record here ($(perf --version 2>&1 | head -1), kernel $(uname -r))"
	fi
fi

python3 bench/taskbench.py table <"$work/results.jsonl"
jq -s --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" --arg cpus "$(nproc)" \
	'{cpus: ($cpus|tonumber), load_average_at_end: $load, rounds: .}' "$work/results.jsonl" >"$json_out"
echo "   raw numbers: $json_out"
if [[ " $sides " == *" gvx "* ]]; then
	[ "$(gstat)" = "$sum0" ] || { echo "bench/task.sh: the golden volume changed!" >&2; exit 1; }
	echo "   golden unchanged (size, mtime, ctime)"
fi
