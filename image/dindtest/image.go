package dindtest

import (
	"crypto/sha256"
	_ "embed" // the rootfs script
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"z.gfire.dev/gvx/image/imagetest"
)

// Suite is the Debian release the image is made of.
const Suite = "bookworm"

// Ref is the reference name of the image inside the layout
// ("oci:DIR:latest", or just "oci:DIR").
const Ref = "latest"

// Entrypoint is the image's entrypoint, in /usr/local/bin.
const Entrypoint = "dockerd-entrypoint.sh"

// CacheEnv names the cache directory; DefaultCacheDir is used when unset.
const (
	CacheEnv        = "GVX_TEST_CACHE"
	DefaultCacheDir = "/var/tmp/gvx-test-cache"
)

// packVersion is part of the cache key: bump it when the packing or the
// image config changes.
const packVersion = "dindtest-pack-1"

//go:embed rootfs.sh
var rootfsScript string

// CacheDir is $GVX_TEST_CACHE, or DefaultCacheDir.
func CacheDir() string {
	if d := os.Getenv(CacheEnv); d != "" {
		return d
	}
	return DefaultCacheDir
}

// Key is the cache key of the image built from mirror: a hex sha256 of
// the build script, the packer version, the mirror, the suite and the
// architecture.
func Key(mirror string) string {
	h := sha256.New()
	for _, s := range []string{rootfsScript, packVersion, mirror, Suite, runtime.GOARCH} {
		fmt.Fprintf(h, "%d:%s\n", len(s), s)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Config is the image's runtime configuration.
func Config() v1.Config {
	return v1.Config{
		Entrypoint: []string{Entrypoint},
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Volumes:    map[string]struct{}{"/var/lib/docker": {}},
	}
}

// writeLayout packs rootfs as the one layer of an OCI image layout in
// layoutDir (created), named Ref.
func writeLayout(rootfs, layoutDir string) error {
	p, err := layout.Write(layoutDir, empty.Index)
	if err != nil {
		return fmt.Errorf("dindtest: %w", err)
	}
	blobs := filepath.Join(layoutDir, "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return err
	}
	// The layer is written in place as its blob: AppendImage finds it
	// there with the right size and does not copy it.
	l, err := packRootfs(rootfs, blobs)
	if err != nil {
		return err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	if img, err = mutate.AppendLayers(img, l); err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: imagetest.Epoch}
	cf.Config = Config()
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	err = p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": Ref}))
	if err != nil {
		return fmt.Errorf("dindtest: write layout: %w", err)
	}
	return nil
}
