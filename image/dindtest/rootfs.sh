#!/bin/sh
# Builds the dind test rootfs: ROOTFS MIRROR SUITE PACKAGE... Run as root.
# Part of the cache key of package dindtest: any change here rebuilds.
set -eu
root=$1
mirror=$2
suite=$3
shift 3

debootstrap --variant=minbase "$suite" "$root" "$mirror"

cleanup() {
	umount "$root/proc" 2>/dev/null || true
}
trap cleanup EXIT
mount -t proc proc "$root/proc"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# No service starts while packages install.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"

in_root() {
	chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"
}
# A mirror snapshot's sid Release outlives its Valid-Until (seen: "is
# expired (invalid since 25d)"); signatures are still checked.
in_root apt-get -qq -o Acquire::Check-Valid-Until=false update
in_root apt-get -qq install -y --no-install-recommends "$@" iptables ca-certificates
# Debian's default iptables is the nft variant, which gVisor cannot serve.
in_root update-alternatives --set iptables /usr/sbin/iptables-legacy
in_root update-alternatives --set ip6tables /usr/sbin/ip6tables-legacy
in_root apt-get -qq clean

rm -f "$root/usr/sbin/policy-rc.d"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/debconf/*-old \
	"$root"/var/log/*.log "$root"/var/log/apt/* "$root"/tmp/* "$root"/root/.cache
: >"$root/etc/resolv.conf"
: >"$root/etc/hostname"

cat >"$root/usr/local/bin/dockerd-entrypoint.sh" <<'ENTRY'
#!/bin/sh
# dockerd-entrypoint.sh [DOCKERD-FLAGS...] | [COMMAND ARGS...]
# Flags (or nothing) start dockerd with them; a command runs as given.
# Without a -H/--host flag dockerd listens on /var/run/docker.sock and, when
# DOCKER_TLS_CERTDIR is empty, on tcp://0.0.0.0:2375 (this image has no TLS
# certificates: a non-empty DOCKER_TLS_CERTDIR only gets a warning).
# DOCKERD_EXTRA_FLAGS is appended (e.g. "--iptables=false" under gVisor).
set -e
if [ "$#" -eq 0 ] || [ "${1#-}" != "$1" ]; then
	set -- dockerd "$@"
fi
if [ "$1" = dockerd ]; then
	hosts=
	for a in "$@"; do
		case "$a" in -H | -H=* | --host | --host=*) hosts=yes ;; esac
	done
	if [ -z "$hosts" ]; then
		set -- "$@" --host=unix:///var/run/docker.sock
		if [ -z "${DOCKER_TLS_CERTDIR:-}" ]; then
			set -- "$@" --host=tcp://0.0.0.0:2375
		else
			echo "dockerd-entrypoint.sh: DOCKER_TLS_CERTDIR=$DOCKER_TLS_CERTDIR: this image makes no TLS certificates; listening on the unix socket only" >&2
		fi
	fi
	# shellcheck disable=SC2086
	set -- "$@" ${DOCKERD_EXTRA_FLAGS:-}
fi
exec "$@"
ENTRY
chmod 755 "$root/usr/local/bin/dockerd-entrypoint.sh"
