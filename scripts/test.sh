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
go test -count=1 -timeout 40m ./...

echo "== bounded fuzzing (${FUZZTIME:=10s} per target)"
./scripts/fuzz.sh "$FUZZTIME"
