//go:build !linux

package reflinktest

import "testing"

// Mount skips: loop mounts are a Linux test facility.
func Mount(t testing.TB, kind string) string {
	t.Helper()
	t.Skipf("loop-mounting %s needs Linux", kind)
	return ""
}
