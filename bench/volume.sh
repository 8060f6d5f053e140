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
# Then Python's import storm, in a third episode on the Debian python3
# image of bench/task.sh (bench/taskimg: debootstrapped from the host's
# mirror once, cached per user): a package of MODULES (1,000) small modules
# in 10 sub-packages of 4 sub-sub-packages, each module importing a few
# stdlib names and its sibling (as a real project does), extracted to the
# volume and to tmpfs (not timed), then `python3 -c 'import pkg'` in a
# fresh interpreter twice: cold (no .pyc: every module is compiled and its
# __pycache__/*.pyc written) and warm (every .pyc read back). The time is
# the import's alone (time.perf_counter() in the interpreter around it;
# the interpreter's own start-up reads only the rootfs, the same for both).
#
# The targets take turns, ROUNDS times (each round untars into a fresh
# directory and rewrites the dd file); each target's best round is shown.
# The ratios the issue tracks come last: volume vs tmpfs as the median of
# the rounds' own ratios (the two run back to back in one episode, so a
# neighbour's burst on a shared machine weighs on both), volume vs the
# directfs bind mount (another episode) from the best rounds.
#
# usage: bench/volume.sh [FILES] [ROUNDS]   (defaults 2000, 5; needs go;
#        root the first time, for bench/taskimg's debootstrap)
# env:   MODULES=1000 (0 skips the Python case)  PROFILE_DIR=DIR (rungv
#        --profile-dir: the Sentry's CPU profile and the volume's request
#        counters per episode)  ONLY=untar|python  PATCHES=0 (rungv
#        without gvx's gVisor patches)
set -euo pipefail
cd "$(dirname "$0")/.."
files=${1:-2000}
rounds=${2:-5}
modules=${MODULES:-1000}
only=${ONLY:-}
case $only in "" | untar | python) ;; *) echo "bench/volume.sh: ONLY=$only: want untar or python" >&2; exit 2 ;; esac
case $modules in *[!0-9]* | "") echo "bench/volume.sh: MODULES=$modules: want a number (a multiple of 40)" >&2; exit 2 ;; esac
[ "$only" = untar ] && modules=0
work=$(mktemp -d /var/tmp/gvx-volume-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
prof=()
if [ -n "${PROFILE_DIR:-}" ]; then mkdir -p "$PROFILE_DIR"; prof=(--profile-dir "$(realpath "$PROFILE_DIR")"); fi
# rungv with gvx's gVisor patch series (docs/gvisor-patches.md), as
# scripts/build.sh builds it (0014-gofer-children-set saves the volume
# two lookups per new file). PATCHES=0 builds upstream gVisor.
if [ "${PATCHES:-1}" != 0 ]; then eval "$(GOWORK=off go run ./cmd/gvisorpatch env)"; fi
CGO_ENABLED=0 go build -o "$work/rungv" ./cmd/rungv
CGO_ENABLED=0 go build -o "$work/" ./cmd/gvx-vol
CGO_ENABLED=0 go run ./runtime/runtimetest/mk "$work/image"
if [ "$modules" -gt 0 ]; then
	# The Debian python3 image bench/task.sh uses (pybase.tar, a docker
	# archive), from bench/taskimg's per-user cache.
	CGO_ENABLED=0 go build -o "$work/taskimg" ./bench/taskimg
	mkdir "$work/imgs"
	"$work/taskimg" "$work/imgs" >&2
fi
export GVX_CACHE_DIR=$work/cache
"$work/gvx-vol" create --size 4G "$work/vol.ext4" >/dev/null
# The tar is made once on the host (FILES small files in 100 directories)
# and bind-mounted read-only; each target untars it with busybox tar.
mkdir -p "$work/src/t"
for i in $(seq 1 "$files"); do d=$work/src/t/d$((i % 100)); mkdir -p "$d"; echo "file $i" >"$d/f$i"; done
mkdir -p "$work/tar"
tar -C "$work/src" -cf "$work/tar/small.tar" t
# The Python package: pkg/aA/bB/mNN.py, MODULES/40 modules per
# sub-sub-package, each importing stdlib names, its previous sibling and
# the same module of the previous sub-package (already imported: a
# sys.modules hit, as most of a project's imports are).
if [ "$modules" -gt 0 ]; then
	per=$((modules / 40))
	[ "$per" -ge 1 ] || { echo "bench/volume.sh: MODULES=$modules: want at least 40" >&2; exit 2; }
	pkg=$work/src/py/pkg
	mkdir -p "$pkg"
	: >"$pkg/__init__.py"
	for a in $(seq 0 9); do
		echo "from . import a$a" >>"$pkg/__init__.py"
		mkdir -p "$pkg/a$a"
		echo "from . import b0, b1, b2, b3" >"$pkg/a$a/__init__.py"
		for b in 0 1 2 3; do
			dir=$pkg/a$a/b$b
			mkdir -p "$dir"
			: >"$dir/__init__.py"
			for m in $(seq 0 $((per - 1))); do
				echo "from . import m$m" >>"$dir/__init__.py"
				{
					echo '"""Module '"a$a.b$b.m$m"' of a made-up project."""'
					echo "import os"
					echo "import sys"
					echo "import json"
					echo "from collections import OrderedDict"
					echo "from functools import lru_cache"
					[ "$m" -gt 0 ] && echo "from . import m$((m - 1)) as prev"
					[ "$a" -gt 0 ] && echo "from pkg.a$((a - 1)).b$b import m$m as left"
					cat <<-PY
						CONFIG = OrderedDict(name="a$a.b$b.m$m", index=$m, tags=["x", "y", "z"])


						class Thing$m:
						    """Holds a value and renders it."""

						    def __init__(self, value, *, scale=1):
						        self.value = value
						        self.scale = scale

						    def render(self):
						        return json.dumps({"value": self.value * self.scale, "where": os.path.join("a$a", "b$b")})

						    def __repr__(self):
						        return f"Thing$m({self.value!r}, scale={self.scale})"


						@lru_cache(maxsize=None)
						def helper$m(n):
						    return [i * n for i in range(16) if i % 3 != $((m % 3))]


						def main(argv=None):
						    argv = sys.argv[1:] if argv is None else argv
						    return [Thing$m(x).render() for x in argv]
					PY
				} >"$dir/m$m.py"
			done
		done
	done
	tar -C "$work/src/py" -cf "$work/tar/py.tar" pkg
fi
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
# One line per target and round: "py TARGET ROUND COLD_MS WARM_MS". The
# first python3 warms the rootfs's page cache for the stdlib; the targets
# go in the other order every second round.
pyscript='unset PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX; imp="import time; t = time.perf_counter(); import pkg; print(round((time.perf_counter() - t) * 1000, 1))"
python3 -c "import os, sys, json, collections, functools" && cat /tar/py.tar >/dev/null
rev=; for d in $DIRS; do rev="$d $rev"; done
for r in $(seq 1 $ROUNDS); do
  ds=$DIRS; [ $((r % 2)) = 1 ] || ds=$rev
  for d in $ds; do
    mkdir -p $d/py$r && tar -xf /tar/py.tar -C $d/py$r && sync
    c=$(cd $d/py$r && python3 -c "$imp") && w=$(cd $d/py$r && python3 -c "$imp")
    [ -n "$(ls $d/py$r/pkg/a9/b3/__pycache__)" ] || { echo "no .pyc written in $d" >&2; exit 1; }
    echo "py $d $r $c $w"
  done
done'
echo "== $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); $files files, $modules modules, best of $rounds rounds"
{
	if [ "$only" != python ]; then
		"$work/rungv" run "${prof[@]}" --network none -e "DIRS=/vol /tmpfs /overlay" -e "ROUNDS=$rounds" \
			--mount "type=volume,src=$work/vol.ext4,dst=/vol" --mount type=tmpfs,dst=/tmpfs \
			--mount "type=bind,src=$work/tar,dst=/tar,readonly" "oci:$work/image" sh -c "$script"
		mkdir "$work/bind"
		"$work/rungv" run "${prof[@]}" --network none -e DIRS=/bind -e "ROUNDS=$rounds" --mount "type=bind,src=$work/bind,dst=/bind" \
			--mount "type=bind,src=$work/tar,dst=/tar,readonly" "oci:$work/image" sh -c "$script"
	fi
	if [ "$modules" -gt 0 ]; then
		"$work/rungv" run "${prof[@]}" --network none -e "DIRS=/vol /tmpfs" -e "ROUNDS=$rounds" \
			--mount "type=volume,src=$work/vol.ext4,dst=/vol" --mount type=tmpfs,dst=/tmpfs \
			--mount "type=bind,src=$work/tar,dst=/tar,readonly" "docker-archive:$work/imgs/pybase.tar" sh -c "$pyscript"
	fi
} | awk -v files="$files" -v modules="$modules" '
	function max1(x) { return x > 0 ? x : 1 }
	function median(a, n,   i, j, t) {
		for (i = 1; i < n; i++) for (j = i; j > 0 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
		return n % 2 ? a[int(n/2)] : (a[n/2-1] + a[n/2]) / 2
	}
	$1 == "py" {
		C[$2, $3] = $4; W[$2, $3] = $5; if ($3 > prounds) prounds = $3
		if (!($2 in c) || $4 < c[$2]) c[$2] = $4
		if (!($2 in w) || $5 < w[$2]) w[$2] = $5
		if (!($2 in pseen)) { pseen[$2] = 1; porder[pn++] = $2 }
		next
	}
	{ U[$1, $2] = $3; D[$1, $2] = $4; if ($2 > rounds) rounds = $2 }
	!($1 in u) || $3 < u[$1] { u[$1] = $3 }
	!($1 in d) || $4 < d[$1] { d[$1] = $4 }
	!($1 in seen) { seen[$1] = 1; order[n++] = $1 }
	END {
		note["/vol"] = "(ext4lite volume over lisafs)"; note["/overlay"] = "(rootfs memory overlay)"
		note["/bind"] = "(directfs bind mount, an episode without volumes)"
		for (i = 0; i < n; i++) { t = order[i]; printf "%-9s untar %5d files: %6d ms   256 MiB dd: %6d ms   %s\n", t, files, u[t], d[t], note[t] }
		for (i = 0; i < pn; i++) { t = porder[i]; printf "%-9s import %4d modules: no .pyc %7.1f ms   with .pyc %7.1f ms   %s\n", t, modules, c[t], w[t], note[t] }
		if (n) {
			for (r = 1; r <= rounds; r++) { ru[r-1] = U["/vol", r] / max1(U["/tmpfs", r]); rd[r-1] = D["/vol", r] / max1(D["/tmpfs", r]) }
			line = ""; for (r = 0; r < rounds; r++) line = line sprintf(" %.2f", ru[r])
			printf "volume/tmpfs:  untar%s   (each round)\n", line
			printf "volume/tmpfs:  untar %.2fx   dd %.2fx   (median of %d rounds)\n", median(ru, rounds), median(rd, rounds), rounds
			printf "volume/bind:   untar %.2fx   dd %.2fx   (best rounds)\n", u["/vol"] / max1(u["/bind"]), d["/vol"] / max1(d["/bind"])
		}
		if (pn) {
			for (r = 1; r <= prounds; r++) { rc[r-1] = C["/vol", r] / C["/tmpfs", r]; rw[r-1] = W["/vol", r] / W["/tmpfs", r] }
			line = ""; for (r = 0; r < prounds; r++) line = line sprintf(" %.2f/%.2f", rc[r], rw[r])
			printf "volume/tmpfs:  import no .pyc/with .pyc%s   (each round)\n", line
			printf "volume/tmpfs:  import no .pyc %.2fx   with .pyc %.2fx   (median of %d rounds)\n", median(rc, prounds), median(rw, prounds), prounds
		}
	}'
"$work/gvx-vol" fsck "$work/vol.ext4" >/dev/null && echo "volume fsck: clean"
if command -v e2fsck >/dev/null; then e2fsck -fn "$work/vol.ext4" >/dev/null 2>&1 && echo "volume e2fsck -fn: clean"; fi
