package runtimetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Env is what the runtime's test packages share: the rungv binary and a
// busybox image (Busybox) in a directory every user may read, since the
// rootless variants run them as nobody.
type Env struct {
	Dir      string // remove with os.RemoveAll when done
	Rungv    string // the binary, built with CGO_ENABLED=0
	ImageRef string // "oci:DIR" of the image
}

// NewEnv makes a directory under the system temp directory named for
// prefix, builds rungv into it and writes the Busybox image with cfg and
// extra. On error the directory (if made) is in the returned Env so the
// caller can remove it; an error wrapping ErrNoBusybox means the host has
// no static busybox.
func NewEnv(prefix string, cfg v1.Config, extra ...File) (*Env, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return &Env{}, err
	}
	e := &Env{Dir: dir, Rungv: filepath.Join(dir, "rungv"), ImageRef: "oci:" + filepath.Join(dir, "image")}
	build := exec.Command("go", "build", "-o", e.Rungv, "z.gfire.dev/gvx/cmd/rungv")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return e, fmt.Errorf("go build rungv: %v\n%s", err, out)
	}
	if err := Busybox(filepath.Join(dir, "image"), cfg, extra...); err != nil {
		return e, err
	}
	// Readable (and directories and executables traversable) by all.
	return e, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		mode := fi.Mode().Perm() | 0o444
		if fi.IsDir() || fi.Mode().Perm()&0o100 != 0 {
			mode |= 0o111
		}
		return os.Chmod(p, mode)
	})
}
