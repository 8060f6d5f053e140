package runtime

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckRestorePassFDs: a restore must hand the published ports' pairs
// to the sandbox at the descriptors the checkpoint recorded (gVisor saved
// them); a checkpoint from before the record is not checked.
func TestCheckRestorePassFDs(t *testing.T) {
	o := &Host{RestoreFrom: "/srv/ck"}
	for _, c := range []struct {
		saved, now []int
		want       string
	}{
		{nil, []int{5}, ""},    // an older checkpoint: not recorded
		{[]int{}, []int{}, ""}, // no ports either time
		{[]int{5, 6}, []int{5, 6}, ""},
		{[]int{}, []int{5}, "the checkpoint publishes 0 ports, this restore 1: give it one -p per port"},
		{[]int{5, 6}, []int{5}, "the checkpoint publishes 2 ports, this restore 1"},
		{[]int{5}, []int{6}, "held its published ports at descriptors [5], this restore would pass them at [6]: restore it with the rungv that made the checkpoint"},
	} {
		err := checkRestorePassFDs(o, &CheckpointInfo{PassFDs: c.saved}, c.now)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("saved %v, now %v: %v", c.saved, c.now, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrBadOption) || !strings.Contains(err.Error(), "/srv/ck")):
			t.Errorf("saved %v, now %v: %v, want %q", c.saved, c.now, err, c.want)
		}
	}
	if err := checkRestorePassFDs(o, nil, []int{5}); err != nil {
		t.Errorf("not a restore: %v", err)
	}
}
