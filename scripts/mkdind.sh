#!/usr/bin/env bash
# mkdind.sh DIR [HELLO.tar]: build the Docker-inside test image (Debian
# bookworm + docker.io, via debootstrap from this host's apt mirror; root
# needed) as an OCI layout in DIR, and optionally the busybox "hello" image
# as a docker-archive. The build is cached under $GVX_TEST_CACHE
# (default /var/tmp/gvx-test-cache): only the first run takes minutes.
#   sudo scripts/mkdind.sh /tmp/dind && rungv run oci:/tmp/dind --help
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: $0 DIR [HELLO.tar]" >&2
	exit 2
fi
cd "$(dirname "$0")/.."
args=()
if [ $# -eq 2 ]; then
	args=(-hello "$(realpath -m "$2")")
fi
CGO_ENABLED=0 exec go run ./image/dindtest/mkdind "${args[@]}" "$(realpath -m "$1")"
