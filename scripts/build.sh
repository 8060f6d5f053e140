#!/usr/bin/env bash
# Builds rungv and gvx-vol into DIR (default bin/) with gvx's
# gVisor patch series applied (docs/gvisor-patches.md): the same step as
# scripts/test.sh and scripts/demo.sh. A plain `go build ./cmd/rungv` also
# works and builds upstream gVisor; `rungv info` says what it lacks.
#
# usage: scripts/build.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go >/dev/null || export PATH=/usr/local/go/bin:$PATH
export CGO_ENABLED=0
eval "$(GOWORK=off go run ./cmd/gvisorpatch env)"
out=${1:-bin}
mkdir -p "$out"
go build -o "$out/" ./cmd/gvx-vol ./cmd/rungv
echo "built in $out/: rungv, gvx-vol ($(GOWORK=off go run ./cmd/gvisorpatch list | grep -c '^[0-9]') gVisor patch(es): rungv info lists them)"
