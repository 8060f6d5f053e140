// Package runtimetest makes small OCI images for the runtime's tests from the
// host's static busybox (Debian's busybox-static), never from a registry.
package runtimetest

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// BusyboxPath is where Debian's busybox-static installs the binary.
const BusyboxPath = "/bin/busybox"

// ErrNoBusybox reports a host without a static busybox.
var ErrNoBusybox = errors.New("runtimetest: /bin/busybox is missing or not static (apt-get install busybox-static)")

// File is an extra file of the image.
type File struct {
	Path string
	Mode int64
	Body string
}

// Busybox writes an OCI image layout to dir (created) holding one image:
// /bin/busybox with its applets linked in /bin, /etc/passwd and /etc/group
// (root, nobody, and "alice" 1000:1000 in groups alice and "staff" 50),
// /home/alice, /tmp, plus extra; with config cfg (os linux).
func Busybox(dir string, cfg v1.Config, extra ...File) error {
	bb, err := os.ReadFile(BusyboxPath)
	if err != nil || !isStatic(BusyboxPath) {
		return ErrNoBusybox
	}
	applets, err := exec.Command(BusyboxPath, "--list").Output()
	if err != nil {
		return fmt.Errorf("busybox --list: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mt := time.Unix(1700000000, 0)
	dirs := []string{"bin", "etc", "home", "home/alice", "root", "tmp", "usr", "usr/bin", "var"}
	for _, d := range dirs {
		mode := int64(0o755)
		uid := 0
		switch d {
		case "tmp":
			mode = 0o1777
		case "home/alice":
			uid = 1000
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode, Uid: uid, Gid: uid, ModTime: mt}); err != nil {
			return err
		}
	}
	files := append([]File{
		{Path: "etc/passwd", Mode: 0o644, Body: "root:x:0:0:root:/root:/bin/sh\nalice:x:1000:1000:Alice:/home/alice:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"},
		{Path: "etc/group", Mode: 0o644, Body: "root:x:0:\nstaff:x:50:alice\nalice:x:1000:\nnogroup:x:65534:\n"},
	}, extra...)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: int64(len(bb)), ModTime: mt}); err != nil {
		return err
	}
	if _, err := tw.Write(bb); err != nil {
		return err
	}
	for _, a := range strings.Fields(string(applets)) {
		if a == "busybox" || strings.Contains(a, "/") {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777, ModTime: mt}); err != nil {
			return err
		}
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.Path, Mode: f.Mode, Size: int64(len(f.Body)), ModTime: mt}); err != nil {
			return err
		}
		if _, err := io.WriteString(tw, f.Body); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config = "linux", goarch(), cfg
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendImage(img)
}

// isStatic reports whether the ELF file at path has no program interpreter.
func isStatic(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}
