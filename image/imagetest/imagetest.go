// Package imagetest builds small OCI images for tests: layers from tar
// entries you describe (whiteouts and opaque directories included), images
// from those layers, and a bootable one-layer busybox image as an OCI
// layout (BuildBusyboxLayout) that the runtime's tests reuse.
//
// Everything is deterministic: entries keep the order given (as in a real
// layer) and get fixed times, so digests are stable across runs and hosts
// with the same busybox binary.
//
// Example:
//
//	dir := t.TempDir()
//	if err := imagetest.BuildBusyboxLayout(dir); err != nil {
//		t.Skip(err) // no /bin/busybox (Debian package busybox-static)
//	}
//	res, err := image.Add(ctx, c, "oci:"+dir, image.Options{})
package imagetest

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Epoch is the mtime given to entries that set none, and the image
// creation time.
var Epoch = time.Unix(1700000000, 0).UTC()

// Entry is one tar entry of a layer.
type Entry struct {
	Name     string
	Type     byte // tar.TypeReg (default), TypeDir, TypeSymlink, TypeLink, TypeChar, TypeFifo
	Mode     int64
	UID, GID int
	Body     string // regular files
	Linkname string
	Xattrs   map[string]string
	ModTime  time.Time // zero means Epoch
}

// Dir, File, Symlink, Whiteout and Opaque are shorthands for entries.
func Dir(name string, mode int64) Entry { return Entry{Name: name, Type: tar.TypeDir, Mode: mode} }

// File is a regular file with mode 0644.
func File(name, body string) Entry {
	return Entry{Name: name, Type: tar.TypeReg, Mode: 0o644, Body: body}
}

// Symlink points name at target.
func Symlink(name, target string) Entry {
	return Entry{Name: name, Type: tar.TypeSymlink, Mode: 0o777, Linkname: target}
}

// Whiteout deletes dir/name of lower layers (".wh.name").
func Whiteout(dir, name string) Entry {
	return Entry{Name: join(dir, ".wh."+name), Type: tar.TypeReg, Mode: 0o644}
}

// Opaque hides every lower entry of dir (".wh..wh..opq").
func Opaque(dir string) Entry {
	return Entry{Name: join(dir, ".wh..wh..opq"), Type: tar.TypeReg, Mode: 0o644}
}

func join(dir, name string) string {
	if dir == "" || dir == "." {
		return name
	}
	return dir + "/" + name
}

// Tar returns an uncompressed PAX tar of entries, in order.
func Tar(entries ...Entry) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name: e.Name, Typeflag: e.Type, Mode: e.Mode, Uid: e.UID, Gid: e.GID,
			Linkname: e.Linkname, ModTime: e.ModTime, Format: tar.FormatPAX,
		}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.ModTime.IsZero() {
			h.ModTime = Epoch
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.Body))
		}
		if len(e.Xattrs) > 0 {
			h.PAXRecords = map[string]string{}
			for k, v := range e.Xattrs {
				h.PAXRecords["SCHILY.xattr."+k] = v
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("imagetest: %s: %w", e.Name, err)
		}
		if h.Size > 0 {
			if _, err := io.WriteString(tw, e.Body); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Layer makes a gzip-compressed OCI layer of the uncompressed tar b.
func Layer(b []byte) (v1.Layer, error) {
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// Image stacks layers (uncompressed tars, lowest first) into an OCI image
// for platform ("linux/amd64" style; os and arch only) with cfg as its
// runtime configuration.
func Image(platform v1.Platform, cfg v1.Config, layers ...[]byte) (v1.Image, error) {
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	var ls []v1.Layer
	for _, b := range layers {
		l, err := Layer(b)
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
	}
	img, err := mutate.AppendLayers(base, ls...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = platform.OS, platform.Architecture, platform.Variant
	cf.Config = cfg
	cf.Created = v1.Time{Time: Epoch}
	return mutate.ConfigFile(img, cf)
}
