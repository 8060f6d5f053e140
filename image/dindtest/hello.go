package dindtest

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"z.gfire.dev/gvx/image/imagetest"
)

// HelloTag is the name `docker load` gives the hello image.
const HelloTag = "hello:latest"

// WriteHello writes a docker-archive tarball (docker save format) of the
// busybox image of imagetest.BusyboxImage, tagged HelloTag, to path. It
// returns imagetest.ErrNoBusybox when the host has no busybox.
func WriteHello(path string) error {
	img, err := imagetest.BusyboxImage()
	if err != nil {
		return err
	}
	tag, err := name.NewTag(HelloTag)
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		return fmt.Errorf("dindtest: %w", err)
	}
	return nil
}

// WriteTagged writes the busybox image plus one layer holding /etc/gvx-image
// (the tag and a newline) as a docker-archive tagged tag: a second local
// image whose layers differ from the hello image's.
func WriteTagged(path, tag string) error {
	img, err := imagetest.BusyboxImage()
	if err != nil {
		return err
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("dindtest: %w", err)
	}
	body := []byte(tag + "\n")
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	tw.WriteHeader(&tar.Header{Name: "etc/gvx-image", Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
	tw.Write(body)
	if err := tw.Close(); err != nil {
		return fmt.Errorf("dindtest: %w", err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b.Bytes())), nil })
	if err != nil {
		return fmt.Errorf("dindtest: %w", err)
	}
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		return fmt.Errorf("dindtest: %w", err)
	}
	if err := tarball.WriteToFile(path, ref, img); err != nil {
		return fmt.Errorf("dindtest: %w", err)
	}
	return nil
}
