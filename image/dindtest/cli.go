package dindtest

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"z.gfire.dev/gvx/internal/durable"
)

// CLI is the Docker client of a flavour's image, copied out for the host
// to run against the episode's published socket: the same docker CLI and
// plugins (Compose v2, buildx) as inside the episode, whatever the host
// has installed.
type CLI struct {
	// Docker is the docker binary.
	Docker string
	// Config is a DOCKER_CONFIG directory whose cli-plugins/ holds the
	// image's CLI plugins.
	Config string
	// Plugins names the plugins found (e.g. "docker-compose").
	Plugins []string
}

// cliPluginDir is where Debian installs the CLI's plugins.
const cliPluginDir = "usr/libexec/docker/cli-plugins"

// maxCLIFile bounds one extracted binary.
const maxCLIFile = 512 << 20

// ErrNoCLI: the image holds no docker CLI.
var ErrNoCLI = errors.New("dindtest: the image has no /usr/bin/docker")

// ExtractCLI copies /usr/bin/docker and the CLI plugins of the image in
// layoutDir (a Build result) into dir (created, 0755): dir/docker and
// dir/config/cli-plugins/*. The binaries are Debian's, dynamically linked:
// they run on a host whose glibc is as new as the suite's needs (sid's
// CLI needs glibc 2.34; bookworm has 2.36).
func ExtractCLI(layoutDir, dir string) (CLI, error) {
	idx, err := layout.ImageIndexFromPath(layoutDir)
	if err != nil {
		return CLI{}, fmt.Errorf("dindtest: %s: %w", layoutDir, err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 {
		return CLI{}, fmt.Errorf("dindtest: %s: want one image in the index (%v)", layoutDir, err)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		return CLI{}, fmt.Errorf("dindtest: %s: %w", layoutDir, err)
	}
	ls, err := img.Layers()
	if err != nil || len(ls) != 1 {
		return CLI{}, fmt.Errorf("dindtest: %s: want one layer (%v)", layoutDir, err)
	}
	rc, err := ls[0].Uncompressed()
	if err != nil {
		return CLI{}, err
	}
	defer rc.Close()
	c := CLI{Config: filepath.Join(dir, "config")}
	plugins := filepath.Join(c.Config, "cli-plugins")
	if err := os.MkdirAll(plugins, 0o755); err != nil {
		return CLI{}, fmt.Errorf("dindtest: %w", err)
	}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return CLI{}, fmt.Errorf("dindtest: reading the layer of %s: %w", layoutDir, err)
		}
		name := path.Clean(h.Name)
		if h.Typeflag != tar.TypeReg {
			continue
		}
		var dst string
		switch {
		case name == "usr/bin/docker":
			dst = filepath.Join(dir, "docker")
			c.Docker = dst
		case path.Dir(name) == cliPluginDir:
			dst = filepath.Join(plugins, path.Base(name))
			c.Plugins = append(c.Plugins, path.Base(name))
		default:
			continue
		}
		if h.Size > maxCLIFile {
			return CLI{}, fmt.Errorf("dindtest: %s in %s: %d bytes, more than %d", name, layoutDir, h.Size, maxCLIFile)
		}
		if err := writeExecutable(dst, tr); err != nil {
			return CLI{}, err
		}
	}
	if c.Docker == "" {
		return CLI{}, fmt.Errorf("%w (%s)", ErrNoCLI, layoutDir)
	}
	return c, nil
}

// writeExecutable writes r to path as a 0755 file, by a temp file and a
// rename (durable.WriteFile: a concurrent reader never runs half a
// binary).
func writeExecutable(p string, r io.Reader) error {
	if err := durable.WriteFile(p, 0o755, durable.Options{}, func(f *os.File) error {
		_, err := io.Copy(f, r)
		return err
	}); err != nil {
		return fmt.Errorf("dindtest: %s: %w", p, err)
	}
	return nil
}
