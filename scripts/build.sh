#!/usr/bin/env bash
# Builds rungv and gvx-vol into DIR (default bin/) with gvx's
# gVisor patch series applied (docs/gvisor-patches.md): the same step as
# scripts/test.sh and scripts/demo.sh. A plain `go build ./cmd/rungv` also
# works and builds upstream gVisor; `rungv info` says what it lacks.
# -tags urfave_cli_no_docs leaves out urfave/cli's man-page and Markdown
# generators (App.ToMan, ToMarkdown), which no command calls, and with them
# blackfriday, whose init every start of either binary (and each process
# rungv re-executes) otherwise pays: ~0.4 ms and ~120 page faults of a
# gvx-vol clone (docs/gvx-vol.md, "Start-up"). A plain `go build` keeps them.
#
# usage: scripts/build.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go >/dev/null || export PATH=/usr/local/go/bin:$PATH
export CGO_ENABLED=0
eval "$(GOWORK=off go run ./cmd/gvisorpatch env)"
out=${1:-bin}
mkdir -p "$out"
go build -tags urfave_cli_no_docs -o "$out/" ./cmd/gvx-vol ./cmd/rungv
echo "built in $out/: rungv, gvx-vol ($(GOWORK=off go run ./cmd/gvisorpatch list | grep -c '^[0-9]') gVisor patch(es): rungv info lists them)"
