package ext4lite

import (
	"testing"

	"z.gfire.dev/gvx/internal/mounttest"
)

// TestMain keeps this package's loop mounts unpinned by other packages'
// sandboxes (internal/mounttest).
func TestMain(m *testing.M) { mounttest.Main(m) }
