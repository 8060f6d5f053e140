#!/usr/bin/env bash
# Tree import speed and fidelity: gvx-vol (ext4lite) vs mkfs.ext4 -d, side by
# side in one run, on the same tree and the same volume size.
#
#   A  gvx-vol create --size SIZE --from DIR IMG
#   B  gvx-vol create --size SIZE IMG && gvx-vol import IMG TREE.tar
#   C  mkfs.ext4 -q -F -d DIR IMG SIZE
#   D  mke2fs -q -F -t ext4 -d TREE.tar IMG SIZE, e2fsprogs 1.47.4+ from a
#      Debian sid root (bench/sidroot.sh: debootstrap --variant=minbase,
#      cached under /var/tmp/gvx-bench-cache-UID; SID=0 skips D)
#
# The tree is a copy of BENCH_TREE (default /usr/share and /usr/local/go: about
# 0.9 GiB in 67k entries on the machine it was written on) made with cp -a
# --no-preserve=timestamps, so every entry gets a nanosecond mtime (Debian's
# package files carry whole seconds, which would hide what mkfs.ext4 -d
# drops), plus an "extras" directory with what a Docker layer holds besides
# files: hard links, a fifo, char/block devices, user.* and trusted.* xattrs,
# setuid, owners, a sparse file, long and short symlinks. TREE.tar is a PAX
# archive of it (GNU tar --format=posix --xattrs). Each tool runs RUNS times
# after one warm-up (the source stays in the page cache).
#
# Then the physical yardstick: GNU tar -x of TREE.tar onto tmpfs against
# gvx-vol create --from TAR (a new volume: bulk load, no journal commits,
# published by rename) and gvx-vol create + import (into an existing
# volume: journaled) with the volume on the same tmpfs, and the import with
# the volume in the work directory (× is gvx-vol's time over tar's).
#
# Then for each image: e2fsck -fn, gvx-vol fsck, allocated size, and a loop
# mount (read-only) compared with the source: contents (diff -r), type, mode,
# owner, link count, size, device numbers and symlink targets (stat), xattrs
# (getfattr), and mtimes with nanoseconds.
#
# Then the quadratic case: 20,000 empty files in one directory, gvx-vol
# create --from vs mkfs.ext4 -d, checked the same way.
#
# Last, the sparse case: one file of SPARSE (64G) apparent size holding
# SPARSE_DATA (256M) of random data in 64 regions, as a GNU PAX 1.0 sparse
# tar (tar -S --format=posix), against a tar of the same data as a plain
# file (the "data-only" tar): gvx-vol import of each, gvx-vol export of
# each volume, and gvx-vol erofs build of each tar. Sparse import, export and
# build should be within 2x of the data-only ones: holes are never read.
#
# usage: sudo bench/import.sh [RUNS]   (default 3)
# env:   BENCH_TREE="dir dir…"  SIZE=4G  FLAT=20000 (0 skips)  SKIP_TREE=1
#        TMPFS=/dev/shm (where tar -x and the tmpfs volume go)  SID=0
#        SPARSE=64G (0 skips)  SPARSE_DATA=256M  GVX_VOL=prebuilt-binary
#        TAR_X_ONLY=1 (of the tree, only the tar-x race and its images'
#        checks: a few minutes, for the bench lock; use with FLAT=0 SPARSE=0)
#        GVX_VOL_BASE=older-binary (adds its create --from and create +
#        import to the tar-x race: before and after in one run)
# needs: root (loop mount), e2fsprogs, attr (getfattr/setfattr), tar, go (unless
#        GVX_VOL), hyperfine and jq for the tables (else a date +%s%N loop),
#        ~3 × the tree's size free in /var/tmp.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
size=${SIZE:-4G}
flat_n=${FLAT:-20000}
sparse=${SPARSE:-64G}
sparse_data=${SPARSE_DATA:-256M}
[ "$(id -u)" = 0 ] || { echo "bench/import.sh: needs root (loop mounts, devices, trusted.* xattrs)" >&2; exit 1; }
for t in mkfs.ext4 e2fsck mount umount tar diff find stat getfattr setfattr mknod; do
	command -v "$t" >/dev/null || { echo "bench/import.sh: needs $t" >&2; exit 1; }
done

work=$(mktemp -d /var/tmp/gvx-import-bench.XXXXXX)
mnt=$work/mnt
tmpfs=${TMPFS:-/dev/shm}
[ "$(stat -f -c %T "$tmpfs" 2>/dev/null)" = tmpfs ] || { echo "bench/import.sh: TMPFS=$tmpfs is not a tmpfs (set TMPFS to one with ~2 × the tree's size free)" >&2; exit 1; }
tmpfs_work=$(mktemp -d "$tmpfs/gvx-import-bench.XXXXXX")
cleanup() {
	mountpoint -q "$mnt" 2>/dev/null && { umount "$mnt" || umount -l "$mnt"; }
	rm -rf "$work" "$tmpfs_work"
}
trap cleanup EXIT
mkdir "$mnt"

gvx=${GVX_VOL:-}
if [ -z "$gvx" ]; then
	command -v go >/dev/null || { echo "bench/import.sh: needs go (or GVX_VOL=path)" >&2; exit 1; }
	CGO_ENABLED=0 go build -o "$work/" ./cmd/gvx-vol
	gvx=$work/gvx-vol
fi

echo "== $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "${GVX_VOL:-}" ]; then
	built="prebuilt $GVX_VOL"
else
	built="built from $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- ext4lite jbd2 overlay sink cmd/gvx-vol 2>/dev/null || echo ' + uncommitted changes')"
fi
echo "   $(mkfs.ext4 -V 2>&1 | head -1); gvx-vol $built"

# ---------------------------------------------------------------- timing
# race LABEL NAME|IMG|CMD… : runs each command RUNS times after one warm-up,
# removing its IMG (a file, or a directory tar -x fills) before each run
# (untimed). Prints hyperfine's report,
# then medians, CPU time and ratios against the first command.
race() {
	local label=$1
	shift
	local json=$work/$label.json nc name img cmd
	if command -v hyperfine >/dev/null; then
		local args=()
		for nc in "$@"; do
			name=${nc%%|*} img=${nc#*|} cmd=${img#*|} img=${img%%|*}
			args+=(--prepare "rm -rf $img" -n "$name" "$cmd")
		done
		hyperfine --style basic --warmup 1 --runs "$runs" \
			--export-json "$json" --export-markdown "$work/$label.md" "${args[@]}"
		echo
		cat "$work/$label.md"
		if command -v jq >/dev/null; then
			echo
			jq -r '.results as $r | ($r[0]) as $b |
				["command", "median s", "min s", "CPU s (user+sys)", "median ×", "CPU ×"],
				($r[] | [.command, (.median * 1000 | round / 1000), (.min * 1000 | round / 1000),
					((.user + .system) * 1000 | round / 1000),
					(.median / $b.median * 10 | round / 10), ((.user + .system) / ($b.user + $b.system) * 10 | round / 10)])
				| @tsv' "$json" | column -t -s $'\t'
			echo "   (× = this command's time over the first one's: mkfs.ext4's × is how many times faster gvx-vol is)"
		fi
	else
		echo "(hyperfine not installed: date +%s%N loop; median and min in s)"
		for nc in "$@"; do
			name=${nc%%|*} img=${nc#*|} cmd=${img#*|} img=${img%%|*}
			for i in $(seq 0 "$runs"); do
				rm -rf "$img"
				t0=$(date +%s%N)
				bash -c "$cmd"
				t1=$(date +%s%N)
				[ "$i" = 0 ] || echo $((t1 - t0))
			done | sort -n | awk -v n="$name" '{a[NR] = $1} END {printf "%-40s %8.3f %8.3f\n", n, a[int((NR + 1) / 2)] / 1e9, a[1] / 1e9}'
		done
	fi
}

# ---------------------------------------------------------------- fidelity
# listing DIR: one line per entry (lost+found left out): path, type, mode,
# owner, links, size (not for directories: that is layout), device, link
# target; not the root's link count (lost+found adds one). mtimes DIR: path and mtime with nanoseconds. xattrs DIR: path,
# name and hex value per line.
listing() {
	(cd "$1" && find . -path ./lost+found -prune -o -exec stat -c '%n|%F|%a|%u:%g|%h|%s|%t:%T|%N' {} + |
		awk -F'|' -v OFS='|' '$2 == "directory" {$6 = "-"} $1 == "." {$5 = "-"} {print}' | LC_ALL=C sort)
}
mtimes() {
	(cd "$1" && find . -path ./lost+found -prune -o -exec stat -c '%n %.9Y' {} + | LC_ALL=C sort)
}
xattrs() {
	(cd "$1" && getfattr -R -h -d -m - -e hex . 2>/dev/null |
		awk '/^# file: / {f = substr($0, 9); next} /=/ && f !~ /^\.\/lost\+found/ {print f " " $0}' | LC_ALL=C sort)
}
# check NAME IMG SRCDIR: fsck twice, mount read-only, compare.
check() {
	local name=$1 img=$2 dir=$3 base=$work/check
	echo
	echo "-- $name: $(basename "$img"), size $(stat -c %s "$img") bytes, allocated $(du -h "$img" | cut -f1) ($(du -B1 "$img" | cut -f1) bytes)"
	if e2fsck -fn "$img" >"$base.e2fsck" 2>&1; then
		echo "   e2fsck -fn: clean ($(tail -1 "$base.e2fsck"))"
	else
		echo "   e2fsck -fn: FAILED (exit $?):"
		head -20 "$base.e2fsck" | sed 's/^/      /'
	fi
	if "$gvx" fsck "$img" >"$base.fsck" 2>&1; then
		echo "   gvx-vol fsck: clean"
	else
		echo "   gvx-vol fsck: findings (exit $?):"
		head -10 "$base.fsck" | sed 's/^/      /'
	fi
	mount -o loop,ro,nosuid,nodev "$img" "$mnt"
	listing "$mnt" >"$base.list"
	mtimes "$mnt" >"$base.mtimes"
	xattrs "$mnt" >"$base.xattrs"
	local content meta mt xa
	content=$(diff -r --no-dereference -x lost+found -x fifo -x chardev -x blockdev -x whiteout "$dir" "$mnt" 2>&1 | wc -l)
	meta=$(diff "$work/$4.list" "$base.list" | grep -c '^>' || true)
	mt=$(diff "$work/$4.mtimes" "$base.mtimes" | grep -c '^>' || true)
	xa=$(diff "$work/$4.xattrs" "$base.xattrs" | grep -c '^[<>]' || true)
	umount "$mnt"
	echo "   contents (diff -r): $([ "$content" = 0 ] && echo identical || echo "$content lines of differences")"
	echo "   type/mode/owner/links/size/dev/symlink (stat): $([ "$meta" = 0 ] && echo identical || echo "$meta of $(wc -l <"$work/$4.list") entries differ")"
	diff "$work/$4.list" "$base.list" | grep '^[<>]' | head -6 | sed 's/^/      /' || true
	echo "   xattrs (getfattr): $([ "$xa" = 0 ] && echo identical || echo "$xa lines differ")"
	diff "$work/$4.xattrs" "$base.xattrs" | grep '^[<>]' | head -4 | sed 's/^/      /' || true
	echo "   mtime with ns: $([ "$mt" = 0 ] && echo "all $(wc -l <"$work/$4.mtimes") identical" || echo "$mt of $(wc -l <"$work/$4.mtimes") differ")"
	paste "$work/$4.mtimes" "$base.mtimes" | awk -F'\t' '$1 != $2 {print "      source " $1 " → image " $2}' | head -3  || true
}

ia=$work/img-a.ext4 ib=$work/img-b.ext4 ic=$work/img-c.ext4 id=$work/img-d.ext4

# D: the newest mke2fs, whose -d also takes a tarball (through libarchive,
# which it dlopens).
sid_mke2fs=
if [ "${SID:-1}" != 0 ] && [ -z "${TAR_X_ONLY:-}" ]; then
	. bench/sidroot.sh
	if sid=$(sidroot e2fsprogs libarchive13t64) && c=$(sidcmd "$sid" /usr/sbin/mke2fs); then
		sid_mke2fs="MKE2FS_CONFIG=$sid/etc/mke2fs.conf $c"
		echo "   sid: $(eval "$sid_mke2fs -V" 2>&1 | head -1) in $sid"
	else
		echo "   (no sid mke2fs: the race leaves D out)"
	fi
fi

# ---------------------------------------------------------------- the tree
if [ -z "${SKIP_TREE:-}" ]; then
	src=$work/src
	mkdir "$src"
	chmod 755 "$src"
	tree=${BENCH_TREE:-/usr/share /usr/local/go}
	for d in $tree; do
		[ -d "$d" ] || { echo "   (skipping $d: not a directory)"; continue; }
		cp -a --no-preserve=timestamps "$d" "$src/$(basename "$d")"
	done
	x=$src/extras
	mkdir "$x"
	printf 'hello\n' >"$x/file"
	ln "$x/file" "$x/hardlink"
	chown 1234:5678 "$x/file"
	setfattr -n user.gvx -v hello "$x/file"
	setfattr -n trusted.overlay.opaque -v y "$x"
	printf '#!/bin/sh\n' >"$x/setuid"
	chmod 4755 "$x/setuid"
	mkfifo "$x/fifo"
	mknod "$x/chardev" c 1 3
	mknod "$x/blockdev" b 7 200
	mknod "$x/whiteout" c 0 0
	ln -s file "$x/shortlink"
	ln -s "$(printf 'long/%.0s' $(seq 30))target" "$x/longlink"
	truncate -s 64M "$x/sparse"
	head -c 1M /dev/urandom | dd of="$x/sparse" bs=1M seek=32 conv=notrunc status=none
	touch -d @1700000000.123456789 "$x/file"
	touch -h -d @1700000001.987654321 "$x/shortlink"
	entries=$(find "$src" | wc -l)
	echo "   tree: $tree + extras → $(du -sh "$src" | cut -f1) in $entries entries (apparent $(du -sh --apparent-size "$src" | cut -f1))"
	tar_file=$work/tree.tar
	tar --format=posix --xattrs --xattrs-include='*' --numeric-owner -C "$src" -cf "$tar_file" .
	echo "   tar: $(du -h --apparent-size "$tar_file" | cut -f1) (GNU tar --format=posix --xattrs)"

	if [ -z "${TAR_X_ONLY:-}" ]; then
	echo
	echo "== import of the tree into a $size volume, $runs runs each"
	tree_cmds=(
		"gvx-vol create --from DIR|$ia|$gvx create --size $size --from $src $ia >/dev/null"
		"gvx-vol create + import TAR|$ib|$gvx create --size $size $ib >/dev/null && $gvx import $ib $tar_file"
		"mkfs.ext4 -d DIR|$ic|mkfs.ext4 -q -F -d $src $ic $size")
	[ -z "$sid_mke2fs" ] || tree_cmds+=("mke2fs (sid) -d TAR|$id|$sid_mke2fs -q -F -t ext4 -d $tar_file $id $size")
	race tree "${tree_cmds[@]}"
	fi

	# The physical yardstick: GNU tar -x of the same tar onto tmpfs (no
	# filesystem to build, no disk), against gvx-vol import with the
	# volume on the same tmpfs and in the work directory (on disk: its
	# journal commits fsync, so the disk's writeback is in the time).
	echo
	echo "== tar -x of the same tar onto tmpfs ($tmpfs) vs gvx-vol import, $runs runs each"
	tx=$tmpfs_work/tar-x vt=$tmpfs_work/vol.ext4 vf=$tmpfs_work/from.ext4
	tarx_cmds=(
		"tar -x onto tmpfs|$tx|mkdir $tx && tar -C $tx -xf $tar_file"
		"gvx-vol create --from TAR, volume on tmpfs|$vf|$gvx create --size $size --from $tar_file $vf >/dev/null"
		"gvx-vol create + import TAR, volume on tmpfs|$vt|$gvx create --size $size $vt >/dev/null && $gvx import $vt $tar_file"
		"gvx-vol create + import TAR, volume on disk (work dir)|$ib|$gvx create --size $size $ib >/dev/null && $gvx import $ib $tar_file")
	if [ -n "${GVX_VOL_BASE:-}" ]; then
		# An older binary in the same race: before/after in one run.
		b=$GVX_VOL_BASE
		tarx_cmds+=(
			"base: gvx-vol create --from TAR, volume on tmpfs|$vt|$b create --size $size --from $tar_file $vt >/dev/null"
			"base: gvx-vol create + import TAR, volume on tmpfs|$vt|$b create --size $size $vt >/dev/null && $b import $vt $tar_file")
	fi
	race tar-x "${tarx_cmds[@]}"
	rm -rf "$tx" "$vt"

	listing "$src" >"$work/src.list"
	mtimes "$src" >"$work/src.mtimes"
	xattrs "$src" >"$work/src.xattrs"
	echo
	echo "== source: $(wc -l <"$work/src.list") entries, $(awk '$2 !~ /\.000000000$/' "$work/src.mtimes" | wc -l) with a non-zero ns part of mtime, $(wc -l <"$work/src.xattrs") xattrs"

	echo
	echo "== fidelity of each image (the last timed run's)"
	[ -n "${TAR_X_ONLY:-}" ] || check "A gvx-vol create --from DIR" "$ia" "$src" src
	check "B gvx-vol create + import TAR" "$ib" "$src" src
	check "E gvx-vol create --from TAR (tar-x race, tmpfs)" "$vf" "$src" src
	if [ -z "${TAR_X_ONLY:-}" ]; then
		check "C mkfs.ext4 -d DIR" "$ic" "$src" src
		[ -z "$sid_mke2fs" ] || check "D mke2fs (sid) -d TAR" "$id" "$src" src
	fi
	rm -f "$ia" "$ib" "$ic" "$id" "$vf" "$tar_file"
	rm -rf "$src"
fi

# ---------------------------------------------------------------- quadratic
if [ "$flat_n" -gt 0 ]; then
	flat=$work/flat
	mkdir -p "$flat/d"
	chmod 755 "$flat"
	(cd "$flat/d" && seq -f "file-%07.0f.txt" 1 "$flat_n" | xargs touch)
	listing "$flat" >"$work/flat.list"
	mtimes "$flat" >"$work/flat.mtimes"
	xattrs "$flat" >"$work/flat.xattrs"
	echo
	echo "== $flat_n empty files in one directory, 1G volume, $runs runs each"
	race flat \
		"gvx-vol create --from DIR|$ia|$gvx create --size 1G --from $flat $ia >/dev/null" \
		"mkfs.ext4 -d DIR|$ic|mkfs.ext4 -q -F -d $flat $ic 1G"
	check "gvx-vol create --from DIR ($flat_n in one dir)" "$ia" "$flat" flat
	check "mkfs.ext4 -d DIR ($flat_n in one dir)" "$ic" "$flat" flat
fi

# ---------------------------------------------------------------- sparse
if [ "$sparse" != 0 ]; then
	sp=$work/sparse
	mkdir -p "$sp/s" "$sp/d"
	apparent=$(numfmt --from=iec "$sparse")
	data=$(numfmt --from=iec "$sparse_data")
	chunk=$((data / 64))
	truncate -s "$apparent" "$sp/s/file"
	for i in $(seq 0 63); do
		# 64 regions spread over the apparent size, the last at its end.
		off=$(((apparent - chunk) / 63 * i / 4096 * 4096))
		head -c "$chunk" /dev/urandom | dd of="$sp/s/file" bs=1M seek="$off" oflag=seek_bytes conv=notrunc status=none
	done
	# The data-only twin: the same bytes as one dense file.
	for i in $(seq 0 63); do
		off=$(((apparent - chunk) / 63 * i / 4096 * 4096))
		dd if="$sp/s/file" bs=1M skip="$off" iflag=skip_bytes,count_bytes count="$chunk" status=none
	done >"$sp/d/file"
	tar -S --format=posix -C "$sp/s" -cf "$sp/sparse.tar" file
	tar --format=posix -C "$sp/d" -cf "$sp/dense.tar" file
	vsize=$(((data * 2 + (1 << 30)) / (1 << 20)))M
	echo
	echo "== sparse: a $sparse file with $sparse_data of data (sparse.tar $(du -h --apparent-size "$sp/sparse.tar" | cut -f1)) vs the data alone (dense.tar $(du -h --apparent-size "$sp/dense.tar" | cut -f1)), $vsize volumes, $runs runs each"
	race sparse-import \
		"import dense.tar (data only)|$sp/d.ext4|$gvx create --size $vsize $sp/d.ext4 >/dev/null && $gvx import $sp/d.ext4 $sp/dense.tar" \
		"import sparse.tar ($sparse apparent)|$sp/s.ext4|$gvx create --size $vsize $sp/s.ext4 >/dev/null && $gvx import $sp/s.ext4 $sp/sparse.tar"
	race sparse-export \
		"export (data only)|$sp/d.out.tar|$gvx export $sp/d.ext4 $sp/d.out.tar" \
		"export ($sparse apparent)|$sp/s.out.tar|$gvx export $sp/s.ext4 $sp/s.out.tar"
	race sparse-erofs \
		"erofs build dense.tar|$sp/d.erofs|$gvx erofs build -q --from-tar --tmpdir $sp $sp/dense.tar $sp/d.erofs" \
		"erofs build sparse.tar|$sp/s.erofs|$gvx erofs build -q --from-tar --tmpdir $sp $sp/sparse.tar $sp/s.erofs"
	e2fsck -fn "$sp/s.ext4" >/dev/null 2>&1 && echo "   e2fsck -fn of the sparse volume: clean" || echo "   e2fsck -fn of the sparse volume: FAILED"
	echo "   exported sparse tar: $(du -h --apparent-size "$sp/s.out.tar" | cut -f1); erofs image: $(du -h --apparent-size "$sp/s.erofs" | cut -f1) apparent, $(du -h "$sp/s.erofs" | cut -f1) allocated"
	got=$(mktemp -d "$work/x.XXXXXX")
	tar -C "$got" -xf "$sp/s.out.tar"
	cmp "$sp/s/file" "$got/file" && echo "   export round trip: identical (cmp)" || echo "   export round trip: DIFFERS"
	rm -rf "$sp" "$got"
fi
