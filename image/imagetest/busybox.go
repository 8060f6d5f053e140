package imagetest

import (
	"archive/tar"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// BusyboxRef is the reference name BuildBusyboxLayout gives its image
// inside the layout ("oci:DIR:latest" or just "oci:DIR").
const BusyboxRef = "latest"

// BusyboxApplets are linked to /bin/busybox in BuildBusyboxLayout's image.
var BusyboxApplets = []string{"sh", "echo", "cat", "ls", "env", "mkdir", "rm", "sleep", "true", "false", "id", "uname"}

// ErrNoBusybox reports that no static busybox binary was found.
var ErrNoBusybox = errors.New("imagetest: no busybox binary (install Debian's busybox-static)")

// FindBusybox returns the path of the host's busybox: /bin/busybox (Debian's
// busybox-static installs it there) or the first busybox on $PATH.
func FindBusybox() (string, error) {
	if st, err := os.Stat("/bin/busybox"); err == nil && st.Mode().IsRegular() {
		return "/bin/busybox", nil
	}
	p, err := exec.LookPath("busybox")
	if err != nil {
		return "", ErrNoBusybox
	}
	return p, nil
}

// BusyboxImage returns a one-layer linux image for the host's architecture
// holding the host's busybox as /bin/busybox, the BusyboxApplets as symlinks
// to it, the usual top-level directories, /etc/passwd and /etc/group, with
// Cmd ["/bin/sh"] and PATH set. The binary must be static to run in a
// chroot or a sandbox (Debian's busybox-static is).
func BusyboxImage() (v1.Image, error) {
	path, err := FindBusybox()
	if err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("imagetest: %w", err)
	}
	entries := []Entry{
		Dir("bin", 0o755),
		{Name: "bin/busybox", Type: tar.TypeReg, Mode: 0o755, Body: string(bin)},
	}
	for _, a := range BusyboxApplets {
		entries = append(entries, Symlink("bin/"+a, "busybox"))
	}
	entries = append(entries,
		Dir("dev", 0o755), Dir("etc", 0o755), Dir("proc", 0o555), Dir("sys", 0o555),
		Dir("root", 0o700), Dir("tmp", 0o1777), Dir("var", 0o755),
		File("etc/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"),
		File("etc/group", "root:x:0:\nnogroup:x:65534:\n"),
		File("etc/hostname", "gvx\n"),
	)
	layer, err := Tar(entries...)
	if err != nil {
		return nil, err
	}
	return Image(v1.Platform{OS: "linux", Architecture: runtime.GOARCH},
		v1.Config{Cmd: []string{"/bin/sh"}, Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, WorkingDir: "/"},
		layer)
}

// BuildBusyboxLayout writes BusyboxImage as an OCI image layout in dir
// (created if needed; an index.json already there is replaced), named
// BusyboxRef.
// Add it with "oci:DIR". It returns ErrNoBusybox when the host has no
// busybox.
func BuildBusyboxLayout(dir string) error {
	img, err := BusyboxImage()
	if err != nil {
		return err
	}
	return WriteLayout(dir, img, BusyboxRef)
}

// WriteLayout writes img as the only image of an OCI layout in dir (its
// index.json is replaced), with the reference name ref (none when empty).
func WriteLayout(dir string, img v1.Image, ref string) error {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("imagetest: %w", err)
	}
	var opts []layout.Option
	if ref != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref}))
	}
	if err := p.AppendImage(img, opts...); err != nil {
		return fmt.Errorf("imagetest: %w", err)
	}
	return nil
}
