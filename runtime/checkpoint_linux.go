package runtime

import (
	"fmt"
	"time"

	"z.gfire.dev/gvx/runtime/checkpoint"
	"z.gfire.dev/gvx/spec"
)

// Checkpoint, restore and fork of seccomp-only episodes: the checkpoint
// directory, the save and the control protocol are package
// runtime/checkpoint's; what stays here is what needs the plan (whether a
// restore's spec can carry a checkpoint) and the relay (relayLinksWait).

// CheckpointInfoFile is the name of the CheckpointInfo in a checkpoint
// directory.
const CheckpointInfoFile = checkpoint.InfoFile

// CheckpointInfo is what a checkpoint directory records besides gVisor's
// files (checkpoint.Info).
type CheckpointInfo = checkpoint.Info

// ReadCheckpointInfo reads dir's CheckpointInfo, checked
// (checkpoint.ReadInfo).
func ReadCheckpointInfo(dir string) (*CheckpointInfo, error) { return checkpoint.ReadInfo(dir) }

// ControlRequest and ControlReply are what Host.Control carries, one
// JSON line each (spec.ControlRequest describes the protocol).
type (
	ControlRequest = spec.ControlRequest
	ControlReply   = spec.ControlReply
)

// relayLinksWait bounds how long a checkpoint waits for the relay's record
// of the guest's bridges.
const relayLinksWait = time.Second

// checkRestoreMatches refuses a restore whose spec cannot carry the
// checkpoint: a volume at every target it had, the same network.
func checkRestoreMatches(p *plan, info *CheckpointInfo) error {
	o := p.host
	have := map[string]bool{}
	for _, m := range p.spec.Mounts {
		if m.Type == MountVolume {
			have[m.Target] = true
		}
	}
	for _, t := range info.Volumes {
		if !have[t] {
			return fmt.Errorf("%w: --restore %s: the checkpoint had a volume at %s: mount a fresh clone of its companion volume there (--mount type=volume,src=CLONE,dst=%s)", ErrBadOption, o.RestoreFrom, t, t)
		}
	}
	if len(have) != len(info.Volumes) {
		return fmt.Errorf("%w: --restore %s: the checkpoint had volumes at %v only: mount no others", ErrBadOption, o.RestoreFrom, info.Volumes)
	}
	if info.Network != p.network {
		return fmt.Errorf("%w: --restore %s: the checkpoint ran with --network %s: restore it with the same", ErrBadOption, o.RestoreFrom, info.Network)
	}
	return nil
}
