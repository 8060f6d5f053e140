#!/usr/bin/env bash
# CPU seconds per container operation inside one Docker episode: N x
# `docker run --rm IMAGE true` and N x `docker exec` into a running
# container, measured over the episode's own cpuacct cgroup (rungv, the
# Sentry, its stubs and the gofer; the docker CLI runs outside it). Run it
# with two rungv builds back to back to see what a gVisor patch buys
# (docs/gvisor-patches.md, 0008-overlay-xino: runc's sealed overlay instead
# of its per-operation memfd copy). Also counts, from runc --debug, how
# often runc sealed its binary in an overlay and how often it copied it.
#
# usage: bench/runcseal.sh RUNGV DIND-LAYOUT IMAGE-TAR [N]
#   RUNGV        a rungv binary (scripts/build.sh, or a plain go build)
#   DIND-LAYOUT  image/dindtest's sid layout (runc >= 1.2), e.g.
#                /var/tmp/gvx-test-cache-0/dind-sid-*
#   IMAGE-TAR    a docker-load archive of an image with /bin/true and
#                sleep whose tag is hello:latest (dindtest.WriteHello)
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,/^set/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench/runcseal.sh: needs root (a cpuacct cgroup)" >&2; exit 1; }
rungv=$(realpath "$1") layout=$(realpath "$2") tar=$(realpath "$3") n=${4:-20}
cpuacct=$(awk '$3 == "cgroup" && $4 ~ /(^|,)cpuacct(,|$)/ {print $2; exit}' /proc/mounts)
[ -n "$cpuacct" ] || { echo "bench/runcseal.sh: needs a cgroup v1 cpuacct hierarchy (this host has none mounted)" >&2; exit 1; }
cg=$cpuacct/runcseal-$$
work=$(mktemp -d /tmp/runcseal.XXXXXX)
mkdir "$cg" "$work/etc" "$work/xlog" "$work/tmp"
chmod 755 "$work" "$work/etc"
cat >"$work/etc/runc-debug" <<'W'
#!/bin/sh
skip=
for a do
	shift
	if [ -n "$skip" ]; then skip=; set -- "$@" /xlog/runc.log; continue; fi
	case $a in
	--log) skip=1; set -- "$@" "$a" ;;
	--log=*) set -- "$@" --log=/xlog/runc.log ;;
	*) set -- "$@" "$a" ;;
	esac
done
exec runc --debug "$@"
W
chmod 755 "$work/etc/runc-debug"
echo '{"runtimes": {"dbg": {"path": "/etc/docker/runc-debug"}}}' >"$work/etc/daemon.json"
pid=
cleanup() {
	[ -z "$pid" ] || kill -TERM "$pid" 2>/dev/null || true
	[ -z "$pid" ] || wait "$pid" 2>/dev/null || true
	rmdir "$cg" 2>/dev/null || echo "bench/runcseal.sh: cgroup $cg still has processes: $(tr '\n' ' ' <"$cg/cgroup.procs")" >&2
	rm -rf "$work"
}
trap cleanup EXIT
sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg" env TMPDIR="$work/tmp" "$rungv" run --rm \
	-p "unix:$work/docker.sock:2375" -e DOCKER_TLS_CERTDIR= \
	--mount type=tmpfs,dst=/var/lib/docker \
	--mount "type=bind,src=$work/etc,dst=/etc/docker,readonly" \
	--mount "type=bind,src=$work/xlog,dst=/xlog" \
	"oci:$layout" --tls=false >"$work/rungv.log" 2>&1 &
pid=$!
d() { docker -H "unix://$work/docker.sock" "$@"; }
for i in $(seq 600); do d info >/dev/null 2>&1 && break; sleep 0.1; done
d info >/dev/null || { tail -20 "$work/rungv.log" >&2; exit 1; }
d load -q -i "$tar" >/dev/null
d run --rm hello:latest true # warm
usage() { cat "$cg/cpuacct.usage"; }
u0=$(usage) t0=$(date +%s.%N)
for i in $(seq "$n"); do d run --rm hello:latest true; done
u1=$(usage) t1=$(date +%s.%N)
d run -d --name c1 hello:latest sleep 100000 >/dev/null
d exec c1 true # warm
u2=$(usage) t2=$(date +%s.%N)
for i in $(seq "$n"); do d exec c1 true; done
u3=$(usage) t3=$(date +%s.%N)
d rm -f c1 >/dev/null
# One run and one exec through runc --debug: did runc seal or copy?
d run --rm --runtime dbg hello:latest true
d run -d --name c2 --runtime dbg hello:latest sleep 100000 >/dev/null
d exec c2 true
d rm -f c2 >/dev/null
sealed=$(grep -c 'using overlayfs for sealed /proc/self/exe' "$work/xlog/runc.log" || true)
copied=$(grep -c 'falling back to making a temporary copy' "$work/xlog/runc.log" || true)
awk -v n="$n" -v u0="$u0" -v u1="$u1" -v u2="$u2" -v u3="$u3" -v t0="$t0" -v t1="$t1" -v t2="$t2" -v t3="$t3" \
	-v s="$sealed" -v c="$copied" -v rungv="$rungv" -v load="$(cut -d' ' -f1-3 /proc/loadavg)" 'BEGIN {
	printf "%s: docker run --rm true: %.3f CPU-s, %.2f s wall each; docker exec true: %.3f CPU-s, %.2f s wall each (N=%d); runc --debug: %d sealed overlays, %d memfd copies; load %s\n",
		rungv, (u1-u0)/1e9/n, (t1-t0)/n, (u3-u2)/1e9/n, (t3-t2)/n, n, s, c, load
}'
