package main

import (
	"strings"
	"testing"
)

// TestStubReuseNoStaleMemory: one guest process maps a page in
// [0x68000, 0x70000) and writes a secret in it; the next (whose address
// space may reuse the first's systrap stub process from the pool) reads
// that address without mapping it: where it has no mapping of its own
// there (gVisor's own trap table may be), the read must die of SIGSEGV,
// never return another process's bytes. Patch
// 0013-nested-keep-trap-table leaves [0x60000, 0x70000) alone when it
// clears a new stub (an outer gVisor's trap table lives there); a first
// version skipped the range for every clean-up, pooled stubs included, and
// a process then read its predecessor's memory. Both isolations, six
// rounds each.
func TestStubReuseNoStaleMemory(t *testing.T) {
	need(t, asRoot)
	tar := nestedTar(t)
	script := `set -u; mkdir /x && tar -xf - -C /x || exit 97
for i in 1 2 3 4 5 6; do
	a=$(/x/nestedprobe lowmap) || exit 3
	echo "$a"
	/x/nestedprobe lowread "${a#mapped }" 2>/dev/null
	echo "lowread exit $?"
done
`
	isolations(t, asRoot, func(t *testing.T, iso string) {
		tmp := privateTmp(t, asRoot)
		r := runRungv(t, asRoot, tmp, tar, "run", "--rm", "--isolation", iso, imageRef, "sh", "-c", script)
		if r.code != 0 {
			t.Fatalf("episode: exit %d\n%s\n%s", r.code, r.stdout, tail(r.stderr))
		}
		if strings.Contains(r.stdout, "secret") || strings.Contains(r.stdout, "read unmapped memory") {
			t.Fatalf("a process read memory it never mapped (another process's, left in a reused stub):\n%s", r.stdout)
		}
		if n := strings.Count(r.stdout, "mapped 0x"); n != 6 {
			t.Fatalf("lowmap ran %d times, want 6:\n%s\n%s", n, r.stdout, tail(r.stderr))
		}
		t.Logf("%s", r.stdout)
	})
}
