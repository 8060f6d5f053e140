// Package checkpoint holds checkpoint, restore and fork of a seccomp-only
// episode (docs/runtime.md, "Checkpoint, restore, fork"): the checkpoint
// directory (Create, Open, ReadInfo), the save and the restore RPCs to the
// Sentry's control server (Controller, RestoreSandbox, RedialControl), and
// the control protocol a caller drives them with (spec.ControlRequest,
// one JSON line each way). Only seccomp-only episodes: there rungv itself
// starts the Sentry and serves its volumes, so it can pause the kernel,
// have gVisor save it, and hold the volume servers still while their
// files are cloned.
//
// A checkpoint directory holds gVisor's three files (checkpoint.img,
// pages_meta.img, pages.img, uncompressed), config.json (the OCI spec the
// sandbox ran with; a restore boots the same spec) and gvx-checkpoint.json
// (Info).
//
// Contract: Create makes the files before the host side locks down, and
// refuses a directory holding a checkpoint already; a Controller saves
// into them at most once, pausing the kernel first and (without resume)
// ending the episode as the checkpoint saw it. Open and ReadInfo return
// only what passed their checks. Whether a restore's spec can carry a
// checkpoint (volumes at the same targets, the same network, the
// published ports' descriptors) is package runtime's, which has the plan.
//
// Trust boundary: a restore trusts the directory's saved kernel and its
// config.json (host paths of the rootfs and mounts), so the directory must
// be the caller's own and writable by no one else, and every file is
// opened through it without following a symlink (internal/privdir);
// gvx-checkpoint.json is checked before use (a container ID that could
// read as a runsc flag or walk a path, a descriptor out of range, a
// relative volume path are refused), and its size and config.json's are
// bounded. The guest controls nothing here but its own saved state, which
// only its own restore loads into a new Sentry; the control requests come
// from the caller (Host.Control), never from the guest.
package checkpoint
