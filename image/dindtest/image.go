package dindtest

import (
	"crypto/sha256"
	_ "embed" // the rootfs script
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"z.gfire.dev/gvx/image/imagetest"
)

// Flavour is one Docker daemon generation of the image: a Debian suite
// and the packages installed into it.
type Flavour struct {
	// Name names the flavour in cache entries, test names and logs.
	Name string
	// Suite is the Debian release debootstrap installs.
	Suite string
	// Packages are installed without recommends (iptables and
	// ca-certificates are always added).
	Packages []string
}

// The flavours: Bookworm is Debian 12's docker.io 20.10 (the CLI is part of
// the package); Sid is unstable's docker.io 28.x with the separate CLI, the
// Compose v2 plugin (`docker compose`) and buildx (BuildKit as the CLI's
// default builder).
var (
	Bookworm = Flavour{Name: "bookworm", Suite: "bookworm", Packages: []string{"docker.io"}}
	Sid      = Flavour{Name: "sid", Suite: "sid", Packages: []string{"docker.io", "docker-cli", "docker-compose", "docker-buildx"}}
)

// Flavours lists every flavour, oldest daemon first.
var Flavours = []Flavour{Bookworm, Sid}

// FlavourNamed returns the flavour called name.
func FlavourNamed(name string) (Flavour, bool) {
	for _, f := range Flavours {
		if f.Name == name {
			return f, true
		}
	}
	return Flavour{}, false
}

// Suite is the Debian release of the default flavour (Bookworm).
const Suite = "bookworm"

// Ref is the reference name of the image inside the layout
// ("oci:DIR:latest", or just "oci:DIR").
const Ref = "latest"

// Entrypoint is the image's entrypoint, in /usr/local/bin.
const Entrypoint = "dockerd-entrypoint.sh"

// CacheEnv names the cache directory; DefaultCacheDir is used when unset.
const CacheEnv = "GVX_TEST_CACHE"

// DefaultCacheDir is the caller's own cache directory,
// /var/tmp/gvx-test-cache-UID: one per user, so that no user's build or
// edit reaches another's layouts (see CheckCacheDir). /var/tmp survives
// reboots and is not the home directory, which sudo may keep.
func DefaultCacheDir() string {
	return fmt.Sprintf("/var/tmp/gvx-test-cache-%d", os.Geteuid())
}

// packVersion is part of the cache key: bump it when the packing or the
// image config changes.
const packVersion = "dindtest-pack-1"

// mirrorSuite is the suite looked up in the host's apt sources: a Debian
// mirror carries every suite, so one that serves the host's bookworm also
// serves sid.
const mirrorSuite = "bookworm"

//go:embed rootfs.sh
var rootfsScript string

// Key is Bookworm's cache key (see Flavour.Key).
func Key(mirror string) string { return Bookworm.Key(mirror) }

// entry is the cache entry's directory name for key.
func (f Flavour) entry(key string) string {
	if f.Name == Bookworm.Name {
		return "dind-" + key[:16]
	}
	return "dind-" + f.Name + "-" + key[:16]
}

// CacheDir is $GVX_TEST_CACHE, or DefaultCacheDir().
func CacheDir() string {
	if d := os.Getenv(CacheEnv); d != "" {
		return d
	}
	return DefaultCacheDir()
}

// Key is the cache key of flavour f built from mirror: a hex sha256 of
// the build script, the packer version, the mirror, the suite, the
// packages and the architecture.
func (f Flavour) Key(mirror string) string {
	h := sha256.New()
	for _, s := range []string{rootfsScript, packVersion, mirror, f.Suite, strings.Join(f.Packages, " "), runtime.GOARCH} {
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
