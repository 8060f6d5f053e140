#!/usr/bin/env bash
# A ready Docker episode (issue 16): how long from asking for an episode
# until its daemon answers docker info (GET /info) through the episode's
# own socket, at 1, 4 and 8 asked for at once, in one run:
#   (a) cold:    gvx.Pool.Claim without a warm pool: reflink clone of the
#                golden volume, sandbox start, dockerd boot, docker info;
#   (b) warm:    gvx.Pool.Claim from a warm pool of C (PoolConfig.Warm;
#                each round starts once C are warm): handover, docker info;
#                the replacements boot behind the claims (the pool's
#                RefillDelay and RefillNice defaults);
#   (b-) warm-eager: as (b), the replacements booting at once at full
#                priority (RefillDelay, RefillNice -1), for the ratio;
#   (b') warm-restore: as (b), the pool refilled by restores of a booted
#                checkpoint (PoolConfig.Checkpoint) instead of cold boots;
#   (c) restore: C restores at once of one checkpoint of a daemon booted
#                and saved once its API answered (seccomp-only; skipped
#                when this rungv has no `rungv checkpoint`); its rows also
#                show the CPU the episode's processes (rungv, the Sentry,
#                systrap's stubs) had used when docker info answered;
#   (d) host:    the yardstick: a host dockerd (root, --data-root on a
#                loop-mounted reflink clone of the same golden, own -H
#                unix:// socket, exec-root and pidfile, --iptables=false
#                --ip6tables=false --bridge=none) from exec to docker info.
# Then the memory of 8 idle dockerd episodes side by side (PSS summed at
# one moment, and what the host's MemAvailable lost), and how many would
# fit in this machine's RAM: cold-booted, and restored at once from one
# checkpoint.
#
# The golden volume is gvx-vol build-golden's, with two images loaded, on
# a loop-mounted XFS (reflink=1); the daemon image is image/dindtest's
# (debootstrap bookworm + docker.io, from the test cache after the first
# build), as in bench/pool-docker.sh.
#
# usage: sudo bench/ready.sh      Env: JOBS="1 4 8", WAYS="cold warm warm-eager
# warm-restore restore host" (WAYS="warm warm-eager host" MEMORY_EPISODES=0:
# the quick warm-only run), REFILL_DELAY=250ms REFILL_NICE=10 (warm's
# PoolConfig.RefillDelay, RefillNice; default: the pool's), ROUNDS (default:
# 16/C, at least 2), MEMORY_EPISODES=8 (0: skip),
# MEMORY_WAYS="memory memory-restore" (cold-booted, restored).
# Restore only, quickly: JOBS="1 4" WAYS="restore host" MEMORY_WAYS=memory-restore
# MEMORY_EPISODES=4. WAYS may hold restore-base: (c) with the rungv binary
# BASE_RUNGV names (e.g. main's), side by side with this tree's; and
# MEMORY_WAYS memory-restore-base likewise. DENSITY_MAX=96: how many idle
# restored episodes fit before anything degrades (below). Needs xfsprogs, debootstrap, go, jq,
# dockerd on the host (for (d)); ~2 GiB in /var/tmp.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-1 4 8}
[ "$(id -u)" = 0 ] || { echo "bench/ready.sh: needs root (debootstrap, loop mounts, the host dockerd)" >&2; exit 1; }
for t in mkfs.xfs mount umount go jq debootstrap dockerd; do
	command -v "$t" >/dev/null || { echo "bench/ready.sh: needs $t" >&2; exit 1; }
done

work=$(mktemp -d /var/tmp/gvx-ready-bench.XXXXXX)
mnt=$work/mnt
cleanup() {
	# a host dockerd's loop mounts, should a run have been killed
	grep -o " $mnt/[^ ]*" /proc/mounts 2>/dev/null | sort -r | while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done || true
	dind_unmount
	rm -rf "$work"
}
trap cleanup EXIT
. bench/dindbench.sh

echo "== $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), load average $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine skews every number)"
dind_setup 64G
go build -o "$work/readybench" ./bench/readybench
"$gvx" build-golden -q --daemon-image "$image" --load "$work/tars/hello.tar" --load "$work/tars/tools.tar" \
	--daemon-arg=--iptables=false --daemon-arg=--ip6tables=false --daemon-arg=--host=unix:///var/run/docker.sock \
	--size 8G "$mnt/golden.ext4"
mkdir "$mnt/eps"
sum0=$(sha256sum "$mnt/golden.ext4" | cut -d' ' -f1)

bench() { # $1 mode, $2 C → one JSON line on stdout
	local rounds=${ROUNDS:-$(( (16 + $2 - 1) / $2 ))}
	[ "$rounds" -ge 2 ] || rounds=2
	"$work/readybench" -mode "$1" -c "$2" -rounds "$rounds" -golden "$mnt/golden.ext4" -scratch "$mnt/eps" -image "$image" \
		-refill-delay "${REFILL_DELAY:-0}" -refill-nice "${REFILL_NICE:-0}"
}
# rungv is also runsc, whose own `checkpoint` answers --help too: support
# means a checkpoint command among rungv's COMMANDS whose --help succeeds.
restore_supported() {
	"$rungv" --help 2>/dev/null | awk '/^COMMANDS:/ {on=1} on' | grep -qE '^ +checkpoint\b' &&
		"$rungv" checkpoint --help >/dev/null 2>&1
}

printf '\n== claim → docker info through the episode'"'"'s socket (ms, p50/p95 over N)\n'
printf '%-3s %-8s %18s %6s %12s %14s\n' C way p50/p95 N "p50 / host" "CPU p50/p95"
for c in $jobs; do
	host=$(bench host "$c")
	hp50=$(jq .p50_ms <<<"$host")
	for way in ${WAYS:-cold warm warm-eager warm-restore restore host}; do
		case $way in
		host) r=$host ;;
		restore-base)
			# (c) with another rungv (BASE_RUNGV: e.g. main's build), side
			# by side with this tree's in the same run.
			[ -n "${BASE_RUNGV:-}" ] || { echo "bench/ready.sh: WAYS has restore-base: set BASE_RUNGV to the rungv to compare" >&2; exit 1; }
			r=$(GVX_RUNGV=$BASE_RUNGV bench restore "$c" | jq -c '.mode = "restore-base"')
			;;
		restore | warm-restore)
			# (c) restore from a booted checkpoint, and a warm pool that
			# refills by restores; both need rungv's checkpoint verb.
			if ! restore_supported; then
				printf '%-3s %-8s %s\n' "$c" "$way" "skipped: not supported (rungv checkpoint)"
				continue
			fi
			r=$(bench "$way" "$c")
			;;
		*) r=$(bench "$way" "$c") ;;
		esac
		jq -r --arg c "$c" --arg w "$way" --argjson h "$hp50" \
			'[$c, $w, "\(.p50_ms|floor)/\(.p95_ms|floor)", .n, "\(.p50_ms / $h * 100 | floor / 100)x",
			  (if .cpu_p50_ms then "\(.cpu_p50_ms|floor)/\(.cpu_p95_ms|floor)" else "" end)] | @tsv' <<<"$r" |
			awk -F'\t' '{printf "%-3s %-8s %18s %6s %12s %14s\n", $1, $2, $3, $4, $5, $6}'
		echo "$r" >>"$work/results.jsonl"
	done
done

m=${MEMORY_EPISODES:-8}
for way in ${MEMORY_WAYS:-memory memory-restore}; do
	[ "$m" -gt 0 ] || break
	if [ "$way" = memory-restore ] && ! restore_supported; then
		printf '\n== memory of restored episodes: skipped: not supported (rungv checkpoint)\n'
		continue
	fi
	case $way in
	memory) printf '\n== memory: %d idle dockerd episodes side by side (cold boots)\n' "$m" ;;
	memory-restore) printf '\n== memory: %d idle dockerd episodes side by side, restored at once from one checkpoint\n' "$m" ;;
	memory-restore-base) printf '\n== memory: as above, with BASE_RUNGV (%s)\n' "${BASE_RUNGV:?memory-restore-base needs BASE_RUNGV}" ;;
	esac
	if [ "$way" = memory-restore-base ]; then
		r=$(GVX_RUNGV=$BASE_RUNGV bench memory-restore "$m" | jq -c '.mode = "memory-restore-base"')
	else
		r=$(bench "$way" "$m")
	fi
	echo "$r" >>"$work/results.jsonl"
	jq -r --argjson total "$(awk '/MemTotal/ {print $2 * 1024}' /proc/meminfo)" '
		"   PSS per episode \(.pss_per_episode_bytes/1048576|floor) MiB\(if .idle_pss_at_ready_p50_bytes then " (at its own ready, alone-ish: \(.idle_pss_at_ready_p50_bytes/1048576|floor) MiB p50)" else "" end); MemAvailable lost per episode \(.mem_available_drop_per_episode_bytes/1048576|floor) MiB",
		"   fit in \($total/1073741824*10|floor/10) GiB: \($total / ([.pss_per_episode_bytes, .mem_available_drop_per_episode_bytes] | max) | floor) episodes (by the larger of the two)"' <<<"$r"
done

# How many idle Docker episodes fit before anything degrades (issue 16,
# part 4): DENSITY_MAX episodes at most (0: skip), DENSITY_STEP at a time,
# restored from one checkpoint and kept; stops early below DENSITY_RESERVE_MIB
# of MemAvailable (default 4096).
if [ "${DENSITY_MAX:-0}" -gt 0 ] && restore_supported; then
	printf '\n== density: idle dockerd episodes kept, restored %s at a time (GET /info one at a time into 8 of them)\n' "${DENSITY_STEP:-16}"
	printf '%8s %14s %10s %14s %10s %16s %16s\n' episodes MemAvailable "PSS each" "host CPU busy" "eps' CPU" "info p50/max" "restore p50"
	"$work/readybench" -mode density -c "$DENSITY_MAX" -step "${DENSITY_STEP:-16}" -reserve-mib "${DENSITY_RESERVE_MIB:-4096}" \
		-golden "$mnt/golden.ext4" -scratch "$mnt/eps" -image "$image" | tee -a "$work/results.jsonl" |
		jq -r 'select(.mode == "density-step") | (.episodes > 0) as $e |
			[.episodes, "\(.mem_available_bytes/1073741824*10|floor/10) GiB", (if $e then "\(.pss_per_episode_bytes/1048576|floor) MiB" else "-" end),
			"\(.idle_cpu_busy*100|floor) %", (if $e then "\(.episodes_cpu*100|floor/100)" else "-" end), (if $e then "\(.info_p50_ms|floor)/\(.info_max_ms|floor) ms" else "-" end),
			(if $e then "\(.restore_p50_ms|floor) ms" else "(before)" end), (.error // "")] | @tsv' |
		awk -F'\t' '{printf "%8s %14s %10s %14s %10s %16s %16s %s\n", $1, $2, $3, $4, $5, $6, $7, $8}' ||
		echo "   (density stopped at a failure: its error is on the last line above)"
fi

[ "$(sha256sum "$mnt/golden.ext4" | cut -d' ' -f1)" = "$sum0" ] || { echo "bench/ready.sh: the golden volume changed!" >&2; exit 1; }
left=$(find "$mnt/eps" -mindepth 1 2>/dev/null | wc -l)
[ "$left" = 0 ] || { echo "bench/ready.sh: $left files left in the scratch dir" >&2; exit 1; }
echo "   golden unchanged (sha256), scratch dir empty; raw results: one JSON line per row above"
cat "$work/results.jsonl" >&2
