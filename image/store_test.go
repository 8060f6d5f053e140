package image

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"z.gfire.dev/gvx/image/imagetest"
)

// TestRemoveAndGC: gc keeps what an entry names and removes the rest;
// rm then gc frees an image's files, but not those another entry shares.
func TestRemoveAndGC(t *testing.T) {
	c := newCache(t)
	mk := func(body string) string {
		lay := t.TempDir()
		img := fixtureImage(t, amd64, [][]byte{mustTar(t, imagetest.File("who", body))})
		if err := imagetest.WriteLayout(lay, img, "v1"); err != nil {
			t.Fatal(err)
		}
		return "oci:" + lay
	}
	srcA, srcB := mk("a"), mk("b")
	a, err := Add(ctx, c, srcA, Options{})
	if err != nil {
		t.Fatal(err)
	}
	aFull, err := Add(ctx, c, srcA, Options{Profile: "full"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Add(ctx, c, srcB, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Nothing is unreferenced yet.
	if r, err := GC(c); err != nil || len(r.Removed) != 0 {
		t.Fatalf("GC of a fully referenced cache: %+v %v", r, err)
	}
	if _, err := Remove(c, "oci:/no/such/layout", ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("rm of an unknown ref: %v", err)
	}
	// rm one profile by a relative path spelling of the same source.
	wd, _ := os.Getwd()
	rel, err := filepath.Rel(wd, srcA[len("oci:"):])
	if err != nil {
		t.Fatal(err)
	}
	gone, err := Remove(c, "oci:"+rel, "full")
	if err != nil || len(gone) != 1 || gone[0].Digest != aFull.Digest {
		t.Fatalf("rm --profile full: %v %v", gone, err)
	}
	r, err := GC(c)
	if err != nil {
		t.Fatal(err)
	}
	// aFull's EROFS and report go; its config is shared with a (same image).
	if len(r.Removed) != 2 || r.Bytes < aFull.Size {
		t.Errorf("GC removed %v (%d bytes), want aFull's erofs and report", r.Removed, r.Bytes)
	}
	for _, p := range []string{a.EROFS, a.Config, b.EROFS, b.Config} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("referenced file removed: %v", err)
		}
	}
	if _, err := os.Stat(aFull.EROFS); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unreferenced %s kept: %v", aFull.EROFS, err)
	}
	// rm by cache digest, then gc: only b is left, and b still works.
	if _, err := Remove(c, a.Digest, ""); err != nil {
		t.Fatal(err)
	}
	if r, err := GC(c); err != nil || len(r.Removed) != 3 {
		t.Errorf("second GC: %+v %v, want a's erofs, report and config", r, err)
	}
	l, err := List(c)
	if err != nil || len(l) != 1 || l[0].EROFS != b.EROFS || l[0].Config != b.Config {
		t.Fatalf("List after rm/gc: %v %v", l, err)
	}
	if got := readFile(t, openEROFS(t, b.EROFS), "who"); got != "b" {
		t.Errorf("b's image reads %q", got)
	}
	// Adding a again rebuilds it.
	again, err := Add(ctx, c, srcA, Options{})
	if err != nil || !again.Created || again.EROFS != a.EROFS {
		t.Errorf("re-add: %+v %v", again, err)
	}
}

// TestGCRacesAdds runs GC in a loop while images are added and removed:
// every image in the index at the end has its files, and every Add
// returned paths that existed when it returned.
func TestGCRacesAdds(t *testing.T) {
	c := newCache(t)
	var srcs []string
	for _, body := range []string{"a", "b", "c"} {
		lay := t.TempDir()
		img := fixtureImage(t, amd64, [][]byte{mustTar(t, imagetest.File("who", body))})
		if err := imagetest.WriteLayout(lay, img, ""); err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, "oci:"+lay)
	}
	stop := make(chan struct{})
	gcDone := make(chan error)
	go func() {
		for {
			select {
			case <-stop:
				gcDone <- nil
				return
			default:
			}
			if _, err := GC(c); err != nil {
				gcDone <- err
				return
			}
		}
	}()
	errs := make(chan error, len(srcs))
	for _, src := range srcs {
		go func() {
			for i := 0; i < 15; i++ {
				res, err := Add(ctx, c, src, Options{})
				if err != nil {
					errs <- err
					return
				}
				// Until the entry is removed, GC must keep its files.
				for _, p := range []string{res.EROFS, res.Config} {
					if _, err := os.Stat(p); err != nil {
						errs <- err
						return
					}
				}
				if i%2 == 1 { // the last add (i = 14) stays
					if _, err := Remove(c, src, ""); err != nil {
						errs <- err
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for range srcs {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	close(stop)
	if err := <-gcDone; err != nil {
		t.Fatal(err)
	}
	l, err := List(c)
	if err != nil || len(l) != 3 {
		t.Fatalf("List: %v %v", l, err)
	}
	for _, r := range l {
		if r.EROFS == "" || r.Config == "" {
			t.Errorf("%s lost its files: %+v", r.Ref, r)
		}
	}
}
