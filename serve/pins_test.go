package serve

import "testing"

func TestParsePinMode(t *testing.T) {
	for in, want := range map[string]PinMode{"": PinPacked, "packed": PinPacked, "always": PinAlways, "never": PinNever} {
		if got, err := ParsePinMode(in); err != nil || got != want {
			t.Errorf("ParsePinMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"true", "1", "Always", "packed "} {
		if _, err := ParsePinMode(in); err == nil {
			t.Errorf("ParsePinMode(%q) took it", in)
		}
	}
}

// TestCPUPinsPacked: on three CPUs the first two episodes run on all of
// them; the third makes the node full and pins them (oldest first, to be
// moved) and itself; later ones each get the least used CPU; an episode's
// end frees its CPU, and once the node is emptier a new episode runs on
// all CPUs again while the live ones keep theirs.
func TestCPUPinsPacked(t *testing.T) {
	p := newCPUPins([]int{4, 5, 7}, false)
	ep := make([]*episode, 8)
	for i := range ep {
		ep[i] = &episode{id: string(rune('a' + i))}
	}
	take := func(e *episode, want int, wantMoved ...*episode) {
		t.Helper()
		c, moved := p.take(e)
		if c != want || len(moved) != len(wantMoved) {
			t.Fatalf("episode %s took CPU %d moving %d, want %d moving %d", e.id, c, len(moved), want, len(wantMoved))
		}
		for i := range moved {
			if moved[i] != wantMoved[i] || p.cpuOf(moved[i]) < 0 {
				t.Fatalf("episode %s moved %s (to %d), want %s pinned", e.id, moved[i].id, p.cpuOf(moved[i]), wantMoved[i].id)
			}
		}
	}
	take(ep[0], -1)
	take(ep[1], -1)
	take(ep[2], 7, ep[0], ep[1])
	if a, b := p.cpuOf(ep[0]), p.cpuOf(ep[1]); a != 4 || b != 5 {
		t.Errorf("the first two went to CPUs %d and %d, want 4 and 5", a, b)
	}
	take(ep[3], 4)
	take(ep[4], 5)
	p.put(ep[1]) // CPU 5 has one left, as 7 has
	take(ep[5], 5)
	p.put(ep[1]) // not live: no change
	if c := p.cpuOf(ep[1]); c != -1 {
		t.Errorf("an ended episode is on CPU %d", c)
	}
	for _, e := range []*episode{ep[0], ep[2], ep[3], ep[4]} {
		p.put(e)
	}
	take(ep[6], -1) // two live: ep[5] keeps CPU 5
	if c := p.cpuOf(ep[5]); c != 5 {
		t.Errorf("a live episode lost its CPU: %d", c)
	}
}

func TestCPUPinsAlways(t *testing.T) {
	p := newCPUPins([]int{0, 1}, true)
	var got []int
	for range 3 {
		c, moved := p.take(&episode{})
		if len(moved) != 0 {
			t.Errorf("PinAlways moved %d episodes", len(moved))
		}
		got = append(got, c)
	}
	if got[0] != 0 || got[1] != 1 || got[2] != 0 {
		t.Errorf("three episodes took %v, want 0 1 0", got)
	}
}
