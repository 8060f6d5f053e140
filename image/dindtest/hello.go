package dindtest

import (
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
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
