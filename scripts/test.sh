#!/usr/bin/env bash
# The whole test suite, set-up included: CI (.ci/run) runs exactly this.
#
#   setup    scripts/setup.sh: as root, the Debian packages the tests use and
#            the cached Debian sid root; without root it lists what will skip
#   static   gofmt, go vet, the storage packages built for darwin and windows
#   go test  every test of the module (as root the kernel cross-checks, loop
#            mounts and a real dockerd run too; without root they skip)
#   python   the Python client's tests against a real rungv serve
#   fuzz     every fuzz target for $FUZZTIME (10s) each
#
# Every phase runs whatever an earlier one did; each reports its own result,
# and the last line counts them all ("total: N passed, N failed, N skipped").
# Full logs are kept in $GVX_TEST_LOGS (default .test-logs/ here), one file
# per phase; the exit status is non-zero if any phase failed.
set -uo pipefail
cd "$(dirname "$0")/.."
command -v go >/dev/null || export PATH=/usr/local/go/bin:$PATH
export CGO_ENABLED=0
logs=${GVX_TEST_LOGS:-$PWD/.test-logs}
mkdir -p "$logs" || exit 1
logs=$(cd "$logs" && pwd)

declare -A result
order=()
total_pass=0 total_fail=0 total_skip=0
# record PHASE STATUS PASSED FAILED SKIPPED: one phase's result. A phase
# that failed but counted no failed test counts as one failure.
record() {
	local name=$1 rc=$2 p=${3:-0} f=${4:-0} s=${5:-0}
	if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; fi
	order+=("$name")
	if [ "$rc" = 0 ]; then
		result[$name]="ok      $p passed, $f failed, $s skipped"
	else
		result[$name]="FAILED  $p passed, $f failed, $s skipped (exit $rc)"
	fi
	total_pass=$((total_pass + p)) total_fail=$((total_fail + f)) total_skip=$((total_skip + s))
}

echo "== setup (log: $logs/setup.log)"
bash ./scripts/setup.sh 2>&1 | tee "$logs/setup.log"
record setup "${PIPESTATUS[0]}"

# Build everything below with gvx's gVisor patches (docs/gvisor-patches.md).
# After setup: on a fresh machine the module download it makes needs the
# CA certificates and git that setup installs.
# (Its status is checked apart: eval "$(cmd)" is 0 when cmd fails, and the
# tests would then run on an unpatched gVisor.)
patchenv=$(GOWORK=off go run ./cmd/gvisorpatch env) || { echo "test.sh: cmd/gvisorpatch failed (see above): no test can build with gvx's gVisor patches" >&2; exit 1; }
eval "$patchenv"

echo "== static checks: gofmt, go vet, darwin and windows builds (log: $logs/static.log)"
(
	rc=0
	bad=$(gofmt -l $(git ls-files '*.go') 2>&1) || rc=1
	if [ -n "$bad" ]; then echo "gofmt wants: $bad"; rc=1; fi
	go vet ./... || rc=1
	for os in darwin windows; do
		GOOS=$os go build ./sink/... $(ls -d ext4lite jbd2 reflink erofs overlay image 2>/dev/null | sed 's#$#/...#;s#^#./#') || rc=1
	done
	exit "$rc"
) >"$logs/static.log" 2>&1
rc=$?
[ "$rc" = 0 ] || tail -40 "$logs/static.log"
record static "$rc"

echo "== go test (log: $logs/go-test.log)"
# Verbose into the log, so that every failure and skip can be listed with
# its output or reason; the package lines (ok/FAIL) are shown as they come.
log=$logs/go-test.log
{
	rc=0
	go test -count=1 -timeout 40m -v ./... 2>&1 || rc=$?
	echo "$rc" >"$log.status"
} | tee "$log" | grep --line-buffered -E '^(ok|FAIL|panic:|\?)[[:space:]]' || true
status=$(cat "$log.status" 2>/dev/null || echo 1)
rm -f "$log.status"
if [ "$status" != 0 ]; then
	echo "== go test failures: each failing test's own output (go test -v attributes it with === RUN/CONT/NAME)"
	awk '
		/^=== (RUN|CONT|NAME|PAUSE) / { cur = $3; next }
		/^ *--- (PASS|FAIL|SKIP): / { if ($2 == "FAIL:" && !($3 in failed)) { failed[$3] = 1; order[++nf] = $3 }; next }
		/^(ok|FAIL|PASS|\?)([[:space:]]|$)/ { cur = ""; next }
		cur != "" { n[cur]++; if (n[cur] <= 60) out[cur] = out[cur] $0 "\n" }
		END {
			for (i = 1; i <= nf; i++) {
				t = order[i]
				if (!(t in out)) continue
				printf "--- %s\n%s", t, out[t]
				if (n[t] > 60) printf "    ... %d more lines\n", n[t] - 60
			}
		}
	' "$log" | head -600
	grep -E -A40 '^panic:' "$log" | head -200 || true
fi
echo "== go test: skipped tests and why"
awk '
	/^=== (RUN|CONT|NAME) / { cur = $3; next }
	/^ +[A-Za-z0-9_]+\.go:[0-9]+: / && cur != "" && !(cur in why) { l = $0; sub(/^ +/, "", l); why[cur] = l; next }
	/^ *--- SKIP: / { print "  " $3 ": " why[$3] }
' "$log" | sort -u
passed=$(grep -cE '^ *--- PASS' "$log" || true)
failed=$(grep -cE '^ *--- FAIL' "$log" || true)
skipped=$(grep -cE '^ *--- SKIP' "$log" || true)
echo "go test: $passed passed, $failed failed, $skipped skipped"
if [ "$(id -u)" != 0 ]; then
	echo "   (not root: the tests above that need root skipped; sudo ./scripts/test.sh runs them too)"
fi
record "go test" "$status" "$passed" "$failed" "$skipped"
# What failed, again at the very end (a long log is often read from its
# tail): the failing tests by name and, when a package hit -timeout, the
# tests that were still running with the last lines each printed.
tailnote=$logs/go-test-tail.txt
# last_lines TEST N: the last N lines TEST printed (go test -v attributes
# output with === RUN/CONT/NAME), indented.
last_lines() {
	awk -v t="$1" -v max="$2" '
		/^=== (RUN|CONT|NAME|PAUSE) / { cur = $3; next }
		/^(ok|FAIL|PASS|panic:)/ { cur = ""; next }
		/^ *--- (PASS|FAIL|SKIP): / { next }
		cur == t { buf[n++ % max] = $0 }
		END { for (i = (n > max ? n - max : 0); i < n; i++) print "    " buf[i % max] }
	' "$log"
}
{
	grep -E '^ *--- FAIL' "$log" | sed 's/^ */  /' | head -40
	# The last lines of the first failing tests that printed anything (a
	# parent often only fails with its subtest), so that a log read from
	# its tail (a CI summary) still says why.
	grep -E '^ *--- FAIL' "$log" | awk '{ print $3 }' | while read -r name; do
		lines=$(last_lines "$name" 20)
		[ -n "$lines" ] || continue
		echo "  --- $name: its last lines"
		echo "$lines"
	done | awk '/^  --- / { if (++n > 3) exit } { print }'
	if grep -q '^panic: test timed out' "$log"; then
		echo "  a package hit go test's -timeout; its running tests and the last lines each printed:"
		awk '
			/^panic: test timed out/ { p = 1; next }
			p && /^[[:space:]]*running tests:/ { next }
			p && /^[[:space:]]+[A-Za-z0-9_\/.-]+ \(/ { sub(/^[[:space:]]+/, ""); print; next }
			p { exit }
		' "$log" | while read -r name _; do
			echo "  --- $name (still running)"
			last_lines "$name" 30
		done
	fi
} >"$tailnote"

echo "== python client tests (clients/python, against a real rungv serve; log: $logs/python.log)"
if command -v python3 >/dev/null && python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))'; then
	timeout 15m python3 -m unittest discover -s clients/python/tests -t clients/python -v >"$logs/python.log" 2>&1
	rc=$?
	# unittest ends with "Ran N tests in Xs" and "OK (skipped=K)" or
	# "FAILED (failures=F, errors=E, skipped=K)".
	ran=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\} in .*/\1/p' "$logs/python.log" | tail -1)
	tail_line=$(grep -E '^(OK|FAILED)( \(.*\))?$' "$logs/python.log" | tail -1)
	num() {
		local v
		v=$(echo "$tail_line" | grep -oE "$1=[0-9]+" | cut -d= -f2 | head -1)
		echo "${v:-0}"
	}
	pf=$(($(num failures) + $(num errors)))
	ps=$(num skipped)
	pp=$((${ran:-0} - pf - ps))
	[ "$pp" -ge 0 ] || pp=0
	if [ "$rc" != 0 ]; then
		grep -E -B2 -A30 '^(ERROR|FAIL):' "$logs/python.log" | head -300
	fi
	tail -3 "$logs/python.log"
	echo "python: $pp passed, $pf failed, $ps skipped"
	record python "$rc" "$pp" "$pf" "$ps"
else
	echo "python: no python3 >= 3.9 on this machine (as root, ./scripts/setup.sh installs it)"
	record python 0 0 0 1
fi

echo "== bounded fuzzing (${FUZZTIME:=10s} per target; log: $logs/fuzz.log)"
bash ./scripts/fuzz.sh "$FUZZTIME" 2>&1 | tee "$logs/fuzz.log"
rc=${PIPESTATUS[0]}
fp=$(sed -n 's/^fuzz: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$logs/fuzz.log" | tail -1)
ff=$(sed -n 's/^fuzz: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$logs/fuzz.log" | tail -1)
record fuzz "$rc" "${fp:-0}" "${ff:-0}"

echo "== summary (logs in $logs)"
bad=0
for name in "${order[@]}"; do
	printf '  %-8s %s\n' "$name" "${result[$name]}"
	case ${result[$name]} in FAILED*) bad=1 ;; esac
done
if [ -s "$tailnote" ]; then
	echo "go test failures (details above and in $logs/go-test.log):"
	cat "$tailnote"
fi
echo "total: $total_pass passed, $total_fail failed, $total_skip skipped"
exit "$bad"
