package imagetest

import (
	"errors"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

func TestBusyboxLayoutIsDeterministic(t *testing.T) {
	var digests []string
	for range 2 {
		dir := t.TempDir()
		if err := BuildBusyboxLayout(dir); errors.Is(err, ErrNoBusybox) {
			t.Skip("no /bin/busybox (Debian package busybox-static)")
		} else if err != nil {
			t.Fatal(err)
		}
		idx, err := layout.ImageIndexFromPath(dir)
		if err != nil {
			t.Fatal(err)
		}
		im, err := idx.IndexManifest()
		if err != nil || len(im.Manifests) != 1 || im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != BusyboxRef {
			t.Fatalf("index %+v %v", im, err)
		}
		digests = append(digests, im.Manifests[0].Digest.String())
	}
	if digests[0] != digests[1] {
		t.Errorf("two builds differ: %v", digests)
	}
}

func TestTar(t *testing.T) {
	a, err := Tar(Dir("d", 0o755), File("d/f", "x"), Whiteout("d", "g"), Opaque("d"), Symlink("l", "d/f"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Tar(Dir("d", 0o755), File("d/f", "x"), Whiteout("d", "g"), Opaque("d"), Symlink("l", "d/f"))
	if string(a) != string(b) {
		t.Error("Tar is not deterministic")
	}
}
