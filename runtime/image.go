package runtime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"z.gfire.dev/gvx/erofs/cache"
	"z.gfire.dev/gvx/image"
)

// Image is an OCI image made ready for the Sentry: its layers flattened
// into one flat-plain EROFS file, and its configuration.
type Image struct {
	// RootfsPath is the absolute path of the EROFS rootfs.
	RootfsPath string
	// Config is the image's runtime configuration (Entrypoint, Cmd, Env,
	// WorkingDir, User).
	Config v1.Config
	// Digest names the flattened image.
	Digest string
	// cache is the image cache the rootfs is in (the relay image goes
	// there too).
	cache *cache.Cache
}

// resolveImage turns an image reference (anything package image takes:
// oci:DIR[:REF], docker-archive:TAR[:TAG], a registry reference or a local
// name) into an EROFS rootfs in the cache at cacheDir ("" means
// image.DefaultCacheDir), under the pull policy (image.Get): a registry
// reference the cache knows is taken from it with no network unless pull
// is PullAlways, and PullNever never fetches. A name the cache knows
// needs only read access to it; when the cache cannot be written (a user
// without a home, root's shared cache), anything else is built into
// scratchDir, which goes with the episode.
func resolveImage(ctx context.Context, ref string, pull PullPolicy, cacheDir, scratchDir string) (*Image, error) {
	if cacheDir == "" {
		d, err := image.DefaultCacheDir()
		if err == nil {
			cacheDir = d
		}
	}
	c, err := openCache(cacheDir)
	if errors.Is(err, cache.ErrUnsafe) {
		// Another user could write there: say so, rather than fall
		// back to building every image into the episode's scratch.
		return nil, fmt.Errorf("image cache: %w", err)
	}
	var res *image.Result
	if err == nil {
		res, err = image.Get(ctx, c, ref, image.PullPolicy(pull), image.Options{})
	}
	if err != nil && (c == nil || errors.Is(err, fs.ErrPermission)) {
		// A shared cache this user may read but not fill (root's): a
		// name it knows still resolves from it; anything else is built,
		// and the relay image always is, in the episode's own cache.
		res = nil
		if shared, serr := cache.Open(cacheDir); serr == nil && pull != PullAlways {
			if r, lerr := image.Lookup(shared, ref, ""); lerr == nil {
				res, err = r, nil
			}
		}
		if c, err = openCache(filepath.Join(scratchDir, "cache")); err != nil {
			return nil, fmt.Errorf("image cache: %w", err)
		}
		if res == nil {
			res, err = image.Get(ctx, c, ref, image.PullPolicy(pull), image.Options{})
		}
	}
	if err != nil {
		return nil, err
	}
	cfg, err := image.ReadConfig(res.Config)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", ref, err)
	}
	p, err := filepath.Abs(res.EROFS)
	if err != nil {
		return nil, err
	}
	return &Image{
		RootfsPath: p,
		Digest:     res.Digest,
		cache:      c,
		Config: v1.Config{
			Entrypoint: cfg.Entrypoint,
			Cmd:        cfg.Cmd,
			Env:        cfg.Env,
			WorkingDir: cfg.WorkingDir,
			User:       cfg.User,
		},
	}, nil
}

// openCache opens (creating) a cache directory this user can write.
func openCache(dir string) (*cache.Cache, error) {
	if dir == "" {
		return nil, errors.New("no cache directory")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if !writable(dir) {
		return nil, fmt.Errorf("%s is not writable", dir)
	}
	return cache.Open(dir)
}

// writable reports whether the current user may create files in dir.
func writable(dir string) bool {
	f, err := os.CreateTemp(dir, ".probe-")
	if err != nil {
		return false
	}
	name := f.Name()
	f.Close()
	return os.Remove(name) == nil
}
