package checkpoint

import (
	"fmt"
	"regexp"
)

// What a restore takes from a checkpoint directory's Info goes
// on the sandbox's command line (the container ID is runsc boot's last
// argument) and into the checks against the restore's own options, so it
// is checked before it is used: a directory someone else may write, or a
// damaged one, is refused with a message naming it, never passed on.

// maxInfo bounds gvx-checkpoint.json (rungv writes a few
// hundred bytes): a larger one is refused before it is read whole.
const maxInfo = 1 << 20

// maxSpec bounds a checkpoint's config.json (the episode's OCI
// spec: some KiB; its env and mounts are the caller's, so be generous).
const maxSpec = 64 << 20

// checkpointID is a container ID a restore may pass on: what runsc
// accepts (validateID), starting with a letter or digit, so it can never
// read as one of runsc boot's flags or walk a path ("gvx-" and 32 hex
// digits, as rungv makes them, is one).
var checkpointID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$`)

// validate refuses a Info a restore must not use.
func (ci *Info) validate() error {
	if !checkpointID.MatchString(ci.ContainerID) {
		return fmt.Errorf("container_id %q is not one rungv makes (letters, digits, _.+-, starting with a letter or digit)", ci.ContainerID)
	}
	for _, fd := range ci.PassFDs {
		if fd < 3 || fd > 1<<20 {
			return fmt.Errorf("pass_fds %v: descriptor %d is out of range", ci.PassFDs, fd)
		}
	}
	for _, v := range ci.Volumes {
		if len(v) == 0 || v[0] != '/' {
			return fmt.Errorf("volumes: %q is not an absolute guest path", v)
		}
	}
	return nil
}
