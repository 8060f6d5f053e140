package hostenv

import (
	"slices"
	"testing"
)

// TestFilter: a caller's secret, and a variable rungv sets for its own
// children, do not pass unless named; the last of a duplicate wins; an
// empty result is not nil (nil Env would pass the caller's everything).
func TestFilter(t *testing.T) {
	in := []string{"PATH=/a", "FOO_SECRET=x", "GVX_SERVE_TOKEN=t", "GVX_EPISODE=forged", "TMPDIR=/t", "PATH=/b", "junk"}
	if got, want := Filter(in), []string{"PATH=/b", "TMPDIR=/t"}; !slices.Equal(got, want) {
		t.Errorf("Filter = %q, want %q", got, want)
	}
	if got, want := Filter(in, "GVX_EPISODE"), []string{"PATH=/b", "GVX_EPISODE=forged", "TMPDIR=/t"}; !slices.Equal(got, want) {
		t.Errorf("Filter with GVX_EPISODE = %q, want %q", got, want)
	}
	if got := Filter([]string{"FOO_SECRET=x"}); got == nil || len(got) != 0 {
		t.Errorf("Filter of nothing allowed = %#v, want an empty, non-nil slice", got)
	}
}
