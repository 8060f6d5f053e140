package runtime

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckNested: inside gVisor a build without the nested patch refuses
// to start an episode, naming the patch and the fix, instead of starting a
// guest that dies of SIGSEGV at its first page fault; outside gVisor
// nothing is refused; rungv info says the same.
func TestCheckNested(t *testing.T) {
	if err := checkNested(false); err != nil {
		t.Fatalf("outside gVisor: %v", err)
	}
	has := HasGVisorPatch(nestedPatch)
	err := checkNested(true)
	switch {
	case has && err != nil:
		t.Fatalf("with %s, inside gVisor: %v", nestedPatch, err)
	case !has && (err == nil || !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), nestedPatch) || !strings.Contains(err.Error(), "scripts/build.sh")):
		t.Fatalf("without %s, inside gVisor: %v; want ErrUnsupported naming the patch and scripts/build.sh", nestedPatch, err)
	}
	for _, inGV := range []bool{false, true} {
		m := nestedInfo(inGV)
		if m.Available != has || m.Active != inGV || !strings.Contains(m.Why, nestedPatch) {
			t.Errorf("nestedInfo(%v) = %+v; this build has the patch: %v", inGV, m, has)
		}
		// A build with nested mode names each of its other fixes it lacks,
		// and only those.
		for _, f := range nestedFixes {
			if named := strings.Contains(m.Why, f.patch); named != (has && !HasGVisorPatch(f.patch)) {
				t.Errorf("nestedInfo(%v).Why names %s: %v; this build has it: %v\n%s", inGV, f.patch, named, HasGVisorPatch(f.patch), m.Why)
			}
		}
	}
}
