# Sourced by the Docker-episode benches (bash; bench/ready.sh,
# bench/pool-docker.sh), from the repository root, with $work (a fresh
# scratch directory) and $mnt (a path under it) set:
#
#   dind_setup SIZE   builds rungv and gvx-vol into $work, the dind test
#                     image (image/dindtest: bookworm + docker.io, from the
#                     test cache after the first build) with two images to
#                     load ($work/tars/hello.tar, tools.tar), its EROFS
#                     cache, and mounts a SIZE loop XFS (reflink=1) at
#                     $mnt; sets rungv, gvx and image, and exports the
#                     cache and GVX_RUNGV.
#   dind_unmount      unmounts $mnt (for the caller's cleanup trap).
dind_setup() {
	export CGO_ENABLED=0
	go build -o "$work/rungv" ./cmd/rungv
	go build -o "$work/" ./cmd/gvx-vol
	mkdir "$work/tars"
	go run ./image/dindtest/mkdind -hello "$work/tars/hello.tar" -tagged "tools:latest=$work/tars/tools.tar" "$work/dind" >/dev/null
	rungv=$work/rungv gvx=$work/gvx-vol image=oci:$work/dind
	export GVX_CACHE_DIR=$work/cache GVX_CACHE=$work/cache GVX_RUNGV=$work/rungv
	"$gvx" image add "$image" >/dev/null # the EROFS cache, once
	truncate -s "$1" "$work/xfs.img"
	mkfs.xfs -q -m reflink=1 "$work/xfs.img"
	mkdir "$mnt"
	mount -o loop,nosuid,nodev "$work/xfs.img" "$mnt"
}

dind_unmount() {
	umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
}
