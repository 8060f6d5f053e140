#!/usr/bin/env bash
# Runs every Fuzz target in the module for a bounded time each.
# usage: scripts/fuzz.sh [DURATION]   (default 10s)
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-10s}
n=0
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
		echo "-- $pkg $f"
		go test -run "^$" -fuzz "^$f\$" -fuzztime "$t" -fuzzminimizetime 5s "$pkg" 2>&1 | tail -3
		n=$((n + 1))
	done
done
echo "fuzzed $n targets for $t each"
