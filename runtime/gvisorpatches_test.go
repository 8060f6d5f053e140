package runtime

import (
	"strings"
	"testing"
)

// TestGVisorPatchesInfo: rungv info's patch lines both ways: a plain build
// lists every patch of the series as missing with what it lacks; a build
// whose generated file named one lists it applied, without a Lacks.
func TestGVisorPatchesInfo(t *testing.T) {
	saved := gvisorPatches
	defer func() { gvisorPatches = saved }()

	gvisorPatches = nil
	ps := GVisorPatches()
	if len(ps) == 0 {
		t.Fatal("no patch listed")
	}
	for _, p := range ps {
		if p.Applied || p.Lacks == "" || p.Enables == "" || HasGVisorPatch(p.Name) {
			t.Fatalf("plain build: %+v", p)
		}
	}
	gvisorPatches = []string{ps[0].Name, "9999-from-elsewhere"}
	got := GVisorPatches()
	if !got[0].Applied || got[0].Lacks != "" || !HasGVisorPatch(ps[0].Name) {
		t.Fatalf("patched build: %+v", got[0])
	}
	last := got[len(got)-1]
	if last.Name != "9999-from-elsewhere" || !last.Applied || !strings.Contains(last.Enables, "not in this checkout") {
		t.Fatalf("an applied patch the series does not know: %+v", last)
	}
}
