package lockdown

import "testing"

// TestAssembleRejectsBadJumps: a filter with a jump to nowhere or
// backwards (a loop) is an error, never a program.
func TestAssembleRejectsBadJumps(t *testing.T) {
	if _, err := Assemble([]Insn{{Jt: "nowhere"}}); err == nil {
		t.Error("a jump to a missing label was accepted")
	}
	if _, err := Assemble([]Insn{{Label: "back"}, {Jt: "back"}}); err == nil {
		t.Error("a backward jump was accepted")
	}
}
