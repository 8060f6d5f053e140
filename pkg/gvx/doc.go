// Package gvx is the Go SDK of gvx: it runs one RL episode — an OCI image
// in its own gVisor sandbox, with ext4 volume files mounted — per Sandbox.
//
// Each Sandbox runs the rungv binary (found through Config.Rungv, the
// GVX_RUNGV environment variable, or PATH, in that order) as a child
// process: `rungv run --spec-fd 4`, reading the episode spec
// (z.gfire.dev/gvx/spec) that Config.Spec builds from the Config over a
// pipe, never a command line parsed back. NewFromSpec and PoolConfig.Spec
// run a whole spec, for the options the seeds' Config does not have.
//
// Running rungv as a child keeps the caller's process free of gVisor
// (rungv is a ~100 MB binary that embeds runsc and locks itself down with
// no_new_privs and seccomp before the guest runs, which a library must not
// do to its host program), and makes
// teardown a signal: when Run's context is cancelled, or Close is called,
// rungv gets SIGTERM, kills the sandbox at once and removes what the
// episode made on the host (its state directory, published sockets and
// host cgroups) before it exits; SIGKILL follows if it is not gone after
// CloseGrace. What a SIGKILL leaves, rungv recorded before making it, and
// the next episode's start or `rungv gc` removes it.
//
// Errors of rungv itself (bad image, bad option) come back from Run as an
// error; the guest's exit status comes back as the int. rungv dies with the
// process that started it (Pdeathsig on Linux), so a SIGKILLed caller
// leaves no episode behind.
//
// For many episodes from one golden volume, NewPool clones the golden file
// per episode (an O(1) reflink), runs the episodes N at a time, always
// tears them down (kill, unlink the clone) and reports each one's reset,
// ready and teardown latency; see ExampleNewPool and docs/pipeline.md.
// With PoolConfig.Warm it keeps episodes booted ahead of demand: Claim
// hands one over (never the same twice) and boots its replacement,
// PoolConfig.Sockets gives each episode its own published sockets (a
// Docker daemon's, probed by DockerReady), WarmMemory caps what the waiting
// ones hold (their PSS, measured at ready: Metrics.IdleMemory), and Close
// tears every one down. With PoolConfig.Checkpoint the pool starts its
// episodes by restoring a checkpoint (below) instead of booting them: a
// warm pool then refills at a fraction of a cold boot's CPU.
// The warm pool is package pool's engine (pkg/gvx/pool), the one rungv
// serve's warm sets use too.
//
// A Sandbox prepared with EnableCheckpoint (before Run; seccomp-only
// isolation) can be saved once: Checkpoint ends it and keeps a checkpoint
// directory (gVisor's saved kernel plus a clone of each volume as it was),
// from which Checkpoint.Restore starts any number of episodes, each on its
// own reflink clone; Fork saves it without ending it and returns n
// children that continue from that instant. See fork.go and
// docs/runtime.md, "Checkpoint, restore, fork".
//
// Example:
//
//	var out bytes.Buffer
//	sb, err := gvx.New(ctx, gvx.Config{
//		OCIImage:    "oci:/srv/images/busybox",
//		Cmd:         []string{"sh", "-c", "echo hi > /data/hello"},
//		NetworkMode: gvx.NetModeNone,
//		Mounts: []gvx.Mount{{Kind: gvx.MountVolume, ImagePath: "ep-0001.ext4", GuestPath: "/data"}},
//		Stdout:      &out,
//	})
//	if err != nil {
//		return err
//	}
//	defer sb.Close()
//	code, err := sb.Run(ctx)
package gvx
