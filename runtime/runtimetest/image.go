// Package runtimetest makes small OCI images for the runtime's tests from the
// host's static busybox (Debian's busybox-static), never from a registry:
// the runtime's variant of package imagetest's busybox image (every applet,
// test users and groups, extra files, a config of the test's choosing).
package runtimetest

import (
	"archive/tar"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"z.gfire.dev/gvx/image/imagetest"
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
// /bin/busybox with every applet linked in /bin, /etc/passwd and
// /etc/group (root, nobody, and "alice" 1000:1000 in groups alice and
// "staff" 50), /home/alice, /tmp, plus extra; with config cfg (os linux).
// It is built with package imagetest's layer and layout writers.
func Busybox(dir string, cfg v1.Config, extra ...File) error {
	bb, err := os.ReadFile(BusyboxPath)
	if err != nil || !isStatic(BusyboxPath) {
		return ErrNoBusybox
	}
	applets, err := exec.Command(BusyboxPath, "--list").Output()
	if err != nil {
		return fmt.Errorf("busybox --list: %w", err)
	}
	var es []imagetest.Entry
	for _, d := range []string{"bin", "etc", "home", "root", "usr", "usr/bin", "var"} {
		es = append(es, imagetest.Dir(d, 0o755))
	}
	es = append(es,
		imagetest.Entry{Name: "home/alice", Type: tar.TypeDir, Mode: 0o755, UID: 1000, GID: 1000},
		imagetest.Dir("tmp", 0o1777),
		imagetest.Entry{Name: "bin/busybox", Mode: 0o755, Body: string(bb)},
	)
	for _, a := range strings.Fields(string(applets)) {
		if a != "busybox" && !strings.Contains(a, "/") {
			es = append(es, imagetest.Symlink("bin/"+a, "busybox"))
		}
	}
	es = append(es,
		imagetest.File("etc/passwd", "root:x:0:0:root:/root:/bin/sh\nalice:x:1000:1000:Alice:/home/alice:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"),
		imagetest.File("etc/group", "root:x:0:\nstaff:x:50:alice\nalice:x:1000:\nnogroup:x:65534:\n"),
	)
	for _, f := range extra {
		es = append(es, imagetest.Entry{Name: f.Path, Mode: f.Mode, Body: f.Body})
	}
	layer, err := imagetest.Tar(es...)
	if err != nil {
		return err
	}
	img, err := imagetest.Image(v1.Platform{OS: "linux", Architecture: goarch()}, cfg, layer)
	if err != nil {
		return err
	}
	return imagetest.WriteLayout(dir, img, "")
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
