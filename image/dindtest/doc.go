// Package dindtest builds the images the Docker-inside tests use, with no
// registry: a Debian root filesystem with docker.io (made by debootstrap
// from the host's own Debian mirror) packed as a one-layer OCI image
// layout, in two flavours (Bookworm: Docker 20.10; Sid: Docker 28 with the
// Compose v2 and buildx CLI plugins), and a busybox "hello" image as a
// docker-archive tarball for `docker load` inside that daemon.
//
// What it promises:
//
//   - Flavour.Build debootstraps `--variant=minbase SUITE`, installs the
//     flavour's packages, iptables and ca-certificates without recommends
//     (apt ignores an expired Valid-Until: mirror snapshots of sid outlive
//     it; signatures are still checked), selects the legacy
//     iptables (gVisor serves the legacy netfilter interface, not nftables),
//     adds /usr/local/bin/dockerd-entrypoint.sh (the entrypoint of Docker's
//     own dind image: flags start dockerd, DOCKER_TLS_CERTDIR= means plain
//     TCP on 2375) and cleans the apt caches. The image's config has
//     Entrypoint ["dockerd-entrypoint.sh"], Cmd [] and PATH.
//   - The result is cached under the cache directory by a key hashing the
//     build script, the packer version, the mirror, the suite, the
//     packages and the architecture (one entry per flavour): the first call
//     takes minutes, later calls return at once. Entries are published by
//     rename; concurrent callers (go test runs packages in parallel) wait on
//     a lock file and build once.
//   - The cache is the caller's own (CacheDir: $GVX_TEST_CACHE or
//     /var/tmp/gvx-test-cache-UID; CheckCacheDir refuses a directory that
//     is a symlink, another user's or writable by group or others), its
//     entries are read-only, and each is verified (VerifyLayout: digests,
//     sizes, index and manifests) before Build hands it out; a damaged
//     entry is rebuilt, or reported with the directory to remove.
//   - CopyLayout makes a copy of an entry to edit: blobs hard-linked,
//     index.json and oci-layout copied, so no edit reaches the cache.
//   - WriteHello writes a docker-archive tarball of a busybox image named
//     HelloTag, made from the host's static busybox.
//
// Trust boundary: Build runs debootstrap and chroot as root, on packages
// from the host's configured Debian mirror (verified by apt with the host's
// archive keyring). It is test tooling, not a product path. Other local
// users are outside it: they can neither make nor write the cache a run
// uses, and an edit of a copy (even root's) is caught by the digests.
//
// Example (a test that needs the image):
//
//	layoutDir, err := dindtest.Sid.Build(ctx, "") // or dindtest.Build: Bookworm
//	if dindtest.IsUnavailable(err) {
//		t.Skip(err) // not root, no debootstrap, or no network to the mirror
//	}
//	if err != nil {
//		t.Fatal(err)
//	}
//	ref := "oci:" + layoutDir
package dindtest
