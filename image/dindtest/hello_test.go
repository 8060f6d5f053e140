package dindtest

import (
	"errors"

	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"z.gfire.dev/gvx/image/imagetest"
)

func TestWriteHello(t *testing.T) {
	p := filepath.Join(t.TempDir(), "hello.tar")
	if err := WriteHello(p); errors.Is(err, imagetest.ErrNoBusybox) {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
	tag := name.MustParseReference(HelloTag).(name.Tag)
	img, err := tarball.ImageFromPath(p, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || len(cf.Config.Cmd) == 0 {
		t.Fatalf("config: %+v", cf)
	}
	ls, err := img.Layers()
	if err != nil || len(ls) != 1 {
		t.Fatalf("layers: %d, %v", len(ls), err)
	}
	rc, err := ls[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	names := tarNames(t, rc)
	for _, want := range []string{"bin/busybox", "bin/sh", "bin/echo", "etc/passwd"} {
		if _, ok := names[want]; !ok {
			t.Errorf("hello image lacks %s", want)
		}
	}
}

func TestWriteTagged(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tools.tar")
	if err := WriteTagged(p, "tools:1"); errors.Is(err, imagetest.ErrNoBusybox) {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
	tag := name.MustParseReference("tools:1").(name.Tag)
	img, err := tarball.ImageFromPath(p, &tag)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := img.Layers()
	if err != nil || len(ls) != 2 {
		t.Fatalf("layers: %d, %v", len(ls), err)
	}
	rc, err := ls[1].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if names := tarNames(t, rc); len(names) != 1 || names["etc/gvx-image"] == nil {
		t.Fatalf("second layer holds %v, want only etc/gvx-image", names)
	}
	if err := WriteTagged(p, "Bad Tag"); err == nil {
		t.Fatal("an invalid tag was accepted")
	}
}
