package spec

// ControlRequest is one request to a running episode's host side, a JSON
// line on `rungv run --control-fd N` (the Go SDK's checkpoints and forks;
// docs/runtime.md, "Checkpoint, restore, fork"). The episode must have
// been started with a checkpoint directory (--checkpoint-dir).
//
//   - {"op":"checkpoint"}: save the episode into its checkpoint directory
//     and end it (its kernel is killed after the save; exit code 0). The
//     reply is {"op":"checkpointed"}; the volumes are closed cleanly when
//     the episode ends and then hold exactly what the checkpoint saw.
//   - {"op":"checkpoint","resume":true}: pause the episode, save it, sync
//     every volume and hold it still; the reply is {"op":"paused"}. The
//     caller clones the volume files (reflink) and sends {"op":"resume"}:
//     the episode continues, reply {"op":"resumed"}. What a fork is made
//     of.
//
// An episode is checkpointed at most once. A failure replies
// {"error":"…"}.
type ControlRequest struct {
	Op     string `json:"op"`
	Resume bool   `json:"resume,omitempty"`
}

// ControlReply answers a ControlRequest.
type ControlReply struct {
	Op    string `json:"op,omitempty"`
	Error string `json:"error,omitempty"`
}

// Control operations and replies.
const (
	OpCheckpoint   = "checkpoint"
	OpResume       = "resume"
	OpCheckpointed = "checkpointed"
	OpPaused       = "paused"
	OpResumed      = "resumed"
)
