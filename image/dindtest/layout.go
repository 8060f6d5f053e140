package dindtest

import (
	"context"
	"testing"
	"time"
)

// Layout is Bookworm.Layout.
func Layout(t testing.TB) string {
	t.Helper()
	return Bookworm.Layout(t)
}

// Layout returns flavour f's OCI layout for t, building it on first use
// (Build into the default cache, at most 20 minutes). It skips t when the
// image cannot be built on this machine (IsUnavailable: not root, no
// debootstrap, no mirror) and fails t on any other error.
func (f Flavour) Layout(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	layout, err := f.Build(ctx, "")
	if IsUnavailable(err) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return layout
}
