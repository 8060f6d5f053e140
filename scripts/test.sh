#!/usr/bin/env bash
# The whole test suite: static checks, unit and cross-check tests, bounded
# fuzzing. Cross-checks against the kernel (loop mounts) need root; without it
# they skip and say so.
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=0

echo "== gofmt"
bad=$(gofmt -l $(git ls-files '*.go') 2>/dev/null || true)
if [ -n "$bad" ]; then echo "gofmt wants: $bad"; exit 1; fi

echo "== go vet"
go vet ./...

echo "== cross-platform build of the storage packages"
for os in darwin windows; do
	GOOS=$os go build ./sink/... $(ls -d ext4lite jbd2 reflink erofs overlay image 2>/dev/null | sed 's#$#/...#;s#^#./#')
done

echo "== go test"
# Verbose into a log, so that every skip can be listed with its reason at
# the end; the package lines (ok/FAIL) are shown as they come.
log=$(mktemp)
trap 'rm -f "$log" "$log.status"' EXIT
{
	rc=0
	go test -count=1 -timeout 40m -v ./... 2>&1 || rc=$?
	echo "$rc" >"$log.status"
} | tee "$log" | grep --line-buffered -E '^(ok|FAIL|panic:|\?)[[:space:]]' || true
status=$(cat "$log.status")
if [ "$status" != 0 ]; then
	echo "== failures: each failing test's own output (go test -v attributes it with === RUN/CONT/NAME)"
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
echo "== skipped tests and why"
awk '
	/^=== (RUN|CONT|NAME) / { cur = $3; next }
	/^ +[A-Za-z0-9_]+\.go:[0-9]+: / && cur != "" && !(cur in why) { l = $0; sub(/^ +/, "", l); why[cur] = l; next }
	/^ *--- SKIP: / { print "  " $3 ": " why[$3] }
' "$log" | sort -u
passed=$(grep -cE '^ *--- PASS' "$log" || true)
failed=$(grep -cE '^ *--- FAIL' "$log" || true)
skipped=$(grep -cE '^ *--- SKIP' "$log" || true)
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ "$status" = 0 ] || exit "$status"

echo "== python client tests (clients/python, against a real rungv serve)"
if command -v python3 >/dev/null && python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))'; then
	timeout 15m python3 -m unittest discover -s clients/python/tests -t clients/python -v
else
	echo "skipped: no python3 >= 3.9 on this machine (the client needs nothing else)"
fi

echo "== bounded fuzzing (${FUZZTIME:=10s} per target)"
./scripts/fuzz.sh "$FUZZTIME"
