package ext4lite

import "testing"

// TestExtentTreeHostileE2fsck: e2fsck -fn reports every tree
// TestExtentTreeHostile makes ext4lite refuse, and calls the volume clean
// before the tree was crafted: reader, Check and e2fsck agree.
func TestExtentTreeHostileE2fsck(t *testing.T) {
	p, _, _, _ := etVolume(t)
	if code, out := ckE2fsck(t, p); code != 0 {
		t.Fatalf("e2fsck -fn exit %d on the volume before crafting:\n%s", code, out)
	}
	for i, tc := range etHostile {
		t.Run(tc.name, func(t *testing.T) {
			p, _, _ := etCraft(t, i)
			// 4: errors left; 8 (or 12): e2fsck gave up ("Found cyclic loop in
			// extent tree ... e2fsck: aborted"). The shared subtrees take
			// e2fsck itself ~20 s: it walks every path.
			if code, out := ckE2fsck(t, p); code&4 == 0 && code != 8 {
				t.Errorf("e2fsck -fn exit %d, want errors (4) or an abort (8):\n%s", code, ckTrim(out))
			}
		})
	}
}
