// Package image turns OCI and Docker images into flattened EROFS root
// filesystems in gvx's content-addressed cache (package erofs/cache), the
// files gVisor's Sentry boots episodes from.
//
// # Sources
//
// Add takes a SOURCE as users type it (ParseSource):
//
//   - a registry reference: "docker.io/library/docker:dind",
//     "localhost:5000/x:y", "name@sha256:…". Credentials come from the
//     docker config ($DOCKER_CONFIG or ~/.docker/config.json and its
//     credential helpers) through authn.DefaultKeychain. Multi-platform
//     indexes resolve to Options.Platform, by default linux on the host's
//     architecture (DefaultPlatform); a miss is a *PlatformError listing
//     what the index has.
//   - "oci:DIR[:REF]", an OCI image layout; REF is a reference name
//     (org.opencontainers.image.ref.name, or its tag) or a digest.
//   - "docker-archive:TAR[:TAG]", a `docker save` tarball.
//
// All registry and manifest handling is go-containerregistry's.
//
// # Flattening
//
// Layers are applied lowest first with overlay.ApplyLayer (whiteouts,
// opaque directories) into an erofs.Builder, in the "runtime" profile by
// default (flat-plain data, no xattrs: what gVisor mounts; the xattrs the
// image would have had are listed in Result.DroppedXattrs) or "full". Each
// layer's uncompressed bytes are hashed on the way and must match the
// diffID the image configuration names; registry blobs are also checked
// against their digests by the client.
//
// # Cache entries
//
// The EROFS file is named by Key: the sha256 over a version string, the
// profile and the chain of layer diffIDs. Compression and manifest format
// do not enter it, so a docker-archive and an OCI layout of one image land
// on the same file. The image's Config (env, entrypoint, cmd, working
// directory, user, exposed ports…) is stored beside it as JSON named by the
// configuration digest, and a small report (size, dropped xattrs) by the
// key. The cache's index maps each (source, profile) to its files; Remove
// drops index entries and GC deletes what no entry names. Concurrent Adds
// of one image from many processes build it once (cache.Pin.Ensure).
//
// # Local names and pull policies
//
// Options.Tags (gvx-vol image add --tag) and Tag (gvx-vol image tag)
// record a registry-style name, normalised as Docker does (NormalizeName:
// "docker:dind" is docker.io/library/docker:dind), for an image in the
// cache, in the same index. Get resolves a source under a PullPolicy, as
// docker run --pull: PullMissing (the default) takes a registry reference
// the cache knows (Lookup: a name, or an image added before) from the
// index with no network and fetches only unknown ones; PullNever never
// fetches; PullAlways always does. Under PullMissing a name typed without
// a registry host that the cache does not hold but that is at most two
// edits from one it does (docker:dnd, docker:dind cached; a difference
// only in digits, a new version, does not count) is refused before any
// registry is asked, naming the cached one and `gvx-vol image ls`; a plain
// miss of such a name that the registry fails too names `gvx-vol image ls`
// and `gvx-vol image add`. Resolve exposes the one resolver (the
// platform rules above) to callers that need the image itself, such as
// the golden build's pulls.
//
// # Trust boundary
//
// Registries, layouts and archives are untrusted: digests are parsed
// strictly before they become file names, the configuration is checked
// against its digest and layers against their diffIDs before anything is
// published, and tar parsing is package overlay's (bounded, fuzzed).
//
// Example:
//
//	c, err := cache.Open(dir) // or image.DefaultCacheDir()
//	res, err := image.Add(ctx, c, "oci:/srv/images/busybox", image.Options{})
//	// res.EROFS: the root filesystem; res.Config: see ReadConfig.
package image
