#!/usr/bin/env bash
# mkdind.sh [--flavour bookworm|sid] DIR [HELLO.tar]: build the Docker-inside
# test image (Debian + docker.io via debootstrap from this host's apt mirror;
# root needed: bookworm's Docker 20.10 by default, sid's Docker 28 with the
# Compose v2 and buildx plugins with --flavour sid) as an OCI layout in DIR,
# and optionally the busybox "hello" image as a docker-archive. The build is
# cached under $GVX_TEST_CACHE (default /var/tmp/gvx-test-cache-UID, the
# caller's own: another user's or a group-writable directory is refused):
# only the first run of each flavour takes minutes. Every run checks the
# cached entry's digests (rebuilding a damaged one) and DIR is a copy to
# edit freely: only the read-only blobs are hard-linked from the cache.
#   sudo scripts/mkdind.sh --flavour sid /tmp/dind && rungv run oci:/tmp/dind --help
set -euo pipefail
flavour=bookworm
if [ "${1:-}" = --flavour ]; then
	flavour=${2:?--flavour needs a name}
	shift 2
fi
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: $0 [--flavour bookworm|sid] DIR [HELLO.tar]" >&2
	exit 2
fi
cd "$(dirname "$0")/.."
args=(-flavour "$flavour")
if [ $# -eq 2 ]; then
	args+=(-hello "$(realpath -m "$2")")
fi
CGO_ENABLED=0 exec go run ./image/dindtest/mkdind "${args[@]}" "$(realpath -m "$1")"
