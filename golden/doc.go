// Package golden builds golden volumes: ext4lite files holding a Docker
// daemon's whole /var/lib/docker with base images already loaded, which
// every episode then clones (the one-time step of the seeds' workflow,
// `gvx-vol build-golden`, whose command is a thin CLI over Build).
//
// Build creates a new volume beside Options.Out, runs the daemon image in
// a gVisor sandbox (the rungv binary, through package gvx: this package
// never links gVisor) with the volume at /var/lib/docker, loads
// docker-archive tarballs and images pulled on the host, stops the daemon
// with SIGTERM so it flushes and unmounts its state, compacts the volume
// (empty journal, free space punched out) and publishes Out atomically.
//
// # What it promises
//
//   - Out appears whole or not at all (temporary file beside it, fsync,
//     rename, fsync of the directory); on any error no Out and no
//     temporary file remain, and an existing Out is kept unless Force.
//   - Pulls resolve through package image's one resolver (image.Resolve):
//     the same platform rules and errors as `gvx-vol image add`. They run
//     on the host with its registry credentials; the guest has no network.
//   - The daemon image resolves like rungv's image (image.Get under
//     Options.DaemonPull): a local name in the image cache ("docker:dind"
//     recorded by `gvx-vol image add --tag`) needs no network.
//   - A docker:dind-shaped image needs no extra flags: its entrypoint
//     (dockerd-entrypoint.sh or dockerd) starts the daemon with the flags
//     the Sentry needs, the ones rungv run adds (package runtime/dind).
//   - The Summary lists every image the daemon holds afterwards, pulled
//     ones with the reference as given and the registry's digest.
//
// # Trust boundary
//
// The daemon image and the tarballs are untrusted guest input: they run
// only inside the sandbox, and the guest's reports (lines on its standard
// output) are parsed with bounds (parseGuest, fuzzed). Registries are
// untrusted too: every blob is checked against its digest by
// go-containerregistry before it is written for the guest.
//
// Example:
//
//	sum, err := golden.Build(ctx, golden.Options{
//		Out:         "/srv/rl-snapshots/golden-docker.ext4",
//		DaemonImage: "docker:dind", // a local name, or oci:DIR
//		Loads:       []string{"python.tar"},
//		Pulls:       []string{"registry.example:5000/team/tools:v3"},
//		Size:        32 << 30,
//	})
package golden
