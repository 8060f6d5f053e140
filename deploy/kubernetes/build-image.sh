#!/usr/bin/env bash
# Builds the container image the manifests here run: the rungv binary and
# a busybox shell, nothing else, as gvx-rungv:dev in the local Docker (load
# it into the cluster's nodes with your usual tool, e.g. `kind load
# docker-image` or `ctr -n k8s.io images import`). No registry is used.
set -euo pipefail
cd "$(dirname "$0")/../.."
tag=${1:-gvx-rungv:dev}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
chmod 755 "$root"
mkdir -p "$root/bin" "$root/tmp" "$root/srv/gvx"
chmod 1777 "$root/tmp"
CGO_ENABLED=0 go build -o "$root/rungv" ./cmd/rungv
cp "$(command -v busybox)" "$root/bin/busybox"
for l in sh ls cat echo sleep; do ln -s busybox "$root/bin/$l"; done
printf 'root:x:0:0::/:/bin/sh\ngvx:x:1000:1000::/tmp:/bin/sh\n' > "$root/etc-passwd"
mkdir -p "$root/etc" && mv "$root/etc-passwd" "$root/etc/passwd"
tar -C "$root" -c . | docker import -c 'USER 1000:1000' -c 'ENV TMPDIR=/tmp GVX_CACHE=/srv/gvx/cache' - "$tag"
echo "built $tag"
