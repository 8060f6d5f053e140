package runtime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"z.gfire.dev/gvx/erofs/cache"
)

// TestResolveImageUnsafeCache: an image cache directory anyone may write
// into (another user could swap the rootfs there) stops the episode with an
// error naming it, instead of being used or silently replaced by a scratch
// cache.
func TestResolveImageUnsafeCache(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	_, err := resolveImage(context.Background(), "oci:"+filepath.Join(t.TempDir(), "no-layout"), PullNever, dir, t.TempDir())
	if !errors.Is(err, cache.ErrUnsafe) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("resolveImage with a 0777 cache: %v; want cache.ErrUnsafe naming %s", err, dir)
	}
}
