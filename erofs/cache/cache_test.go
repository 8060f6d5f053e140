package cache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var hexA = strings.Repeat("a", 64)

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{
		hexA + ".erofs":                      true,
		hexA + ".config.json":                true,
		hexA + ".v2":                         true,
		hexA:                                 false,
		hexA + ".":                           false,
		hexA + "..json":                      false,
		hexA + ".json.":                      false,
		hexA + ".Erofs":                      false,
		hexA + "./x":                         false,
		hexA + ".x/../../etc":                false,
		strings.ToUpper(hexA) + ".erofs":     false,
		hexA[:63] + ".erofs":                 false,
		hexA + "." + strings.Repeat("x", 33): false,
		"../" + hexA[3:] + ".erofs":          false,
		"":                                   false,
	} {
		if got := ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}

func open(t *testing.T) *Cache {
	t.Helper()
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func pin(t *testing.T, c *Cache) *Pin {
	t.Helper()
	p, err := c.Pin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// noLeftovers fails if anything but published objects is in objects/.
func noLeftovers(t *testing.T, c *Cache) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(c.Dir(), objectsDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !ValidName(e.Name()) {
			t.Errorf("left behind in objects/: %s", e.Name())
		}
	}
}

func TestEnsureBuildsOnce(t *testing.T) {
	c := open(t)
	name := hexA + ".erofs"
	var builds, created atomic.Int32
	paths := make([]string, 8)
	var wg sync.WaitGroup
	for i := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := c.Pin()
			if err != nil {
				t.Error(err)
				return
			}
			defer p.Close()
			path, cr, err := p.Ensure(name, func(f *os.File) error {
				builds.Add(1)
				time.Sleep(20 * time.Millisecond) // let the others pile up on the lock
				_, err := f.WriteString("image")
				return err
			})
			if err != nil {
				t.Error(err)
				return
			}
			if cr {
				created.Add(1)
			}
			paths[i] = path
		}()
	}
	wg.Wait()
	if builds.Load() != 1 || created.Load() != 1 {
		t.Errorf("%d builds, %d created; want 1 and 1", builds.Load(), created.Load())
	}
	for _, p := range paths {
		if p != paths[0] {
			t.Errorf("paths differ: %q vs %q", p, paths[0])
		}
	}
	b, err := os.ReadFile(paths[0])
	if err != nil || string(b) != "image" {
		t.Errorf("object holds %q, %v", b, err)
	}
	if got, err := c.Lookup(name); err != nil || got != paths[0] {
		t.Errorf("Lookup = %q, %v", got, err)
	}
	noLeftovers(t, c)
}

func TestEnsureFailurePublishesNothing(t *testing.T) {
	c := open(t)
	p := pin(t, c)
	name := hexA + ".erofs"
	boom := errors.New("boom")
	_, _, err := p.Ensure(name, func(f *os.File) error {
		f.WriteString("half")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if _, err := c.Lookup(name); !errors.Is(err, ErrNotExist) {
		t.Errorf("Lookup after failed build: %v", err)
	}
	noLeftovers(t, c)
	// The next caller builds it.
	_, created, err := p.Ensure(name, func(f *os.File) error { return nil })
	if err != nil || !created {
		t.Errorf("retry: created=%v err=%v", created, err)
	}
}

func TestEnsureRejectsBadNames(t *testing.T) {
	c := open(t)
	p := pin(t, c)
	for _, n := range []string{"../x", hexA, "index.json", hexA + "/x"} {
		if _, _, err := p.Ensure(n, func(*os.File) error { return nil }); !errors.Is(err, ErrBadName) {
			t.Errorf("Ensure(%q): %v, want ErrBadName", n, err)
		}
	}
	p.Close()
	if _, _, err := p.Ensure(hexA+".x", func(*os.File) error { return nil }); err == nil {
		t.Error("Ensure on a closed Pin succeeded")
	}
}

func TestUpdateConcurrent(t *testing.T) {
	c := open(t)
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := c.Update(func(ix *Index) error {
				ix.Entries[fmt.Sprint("ref", i)] = Entry{Objects: []string{fmt.Sprintf("%064x.erofs", i)}, Meta: []byte(`{"i":1}`)}
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	ix, err := c.Index()
	if err != nil {
		t.Fatal(err)
	}
	if len(ix.Entries) != 16 {
		t.Errorf("%d entries, want 16 (an update was lost)", len(ix.Entries))
	}
	// A failing fn changes nothing.
	err = c.Update(func(ix *Index) error {
		delete(ix.Entries, "ref0")
		return errors.New("no")
	})
	if err == nil {
		t.Fatal("Update returned nil")
	}
	if ix, _ := c.Index(); len(ix.Entries) != 16 {
		t.Errorf("failed Update changed the index")
	}
	// Invalid object names are refused before anything is written.
	err = c.Update(func(ix *Index) error {
		ix.Entries["bad"] = Entry{Objects: []string{"../../etc/passwd"}}
		return nil
	})
	if !errors.Is(err, ErrBadName) {
		t.Errorf("bad object name: %v", err)
	}
}

func TestCorruptIndex(t *testing.T) {
	c := open(t)
	for _, body := range []string{"", "{", `{"version":7,"entries":{}}`, `{"version":1,"entries":{"x":{"objects":["../../x"]}}}`, `[]`} {
		if err := os.WriteFile(filepath.Join(c.Dir(), indexFile), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Index(); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Index(%q): %v, want ErrCorrupt", body, err)
		}
		if err := c.Update(func(*Index) error { return nil }); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Update over %q: %v, want ErrCorrupt", body, err)
		}
		if _, err := c.GC(); !errors.Is(err, ErrCorrupt) {
			t.Errorf("GC over %q: %v, want ErrCorrupt (never collect blindly)", body, err)
		}
		if b, _ := os.ReadFile(filepath.Join(c.Dir(), indexFile)); string(b) != body {
			t.Errorf("corrupt index was rewritten to %q", b)
		}
	}
}

func TestGC(t *testing.T) {
	c := open(t)
	p := pin(t, c)
	names := []string{hexA + ".erofs", hexA + ".config.json", strings.Repeat("b", 64) + ".erofs"}
	for _, n := range names {
		if _, _, err := p.Ensure(n, func(f *os.File) error { _, err := f.WriteString(n); return err }); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Update(func(ix *Index) error {
		ix.Entries["keep"] = Entry{Objects: names[:2]}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// A crashed builder's temporary file and spool.
	os.WriteFile(filepath.Join(c.Dir(), objectsDir, "."+names[2]+".tmp-123"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(c.TempDir(), "spool-1"), []byte("x"), 0o644)
	// A foreign file is left alone.
	os.WriteFile(filepath.Join(c.Dir(), objectsDir, "README"), []byte("x"), 0o644)

	// GC waits for the pin.
	done := make(chan *GCResult)
	go func() {
		r, err := c.GC()
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	select {
	case <-done:
		t.Fatal("GC ran while a Pin was held")
	case <-time.After(100 * time.Millisecond):
	}
	p.Close()
	r := <-done
	if len(r.Removed) != 1 || r.Removed[0] != names[2] || r.Bytes != int64(len(names[2])) {
		t.Errorf("removed %v (%d bytes), want [%s]", r.Removed, r.Bytes, names[2])
	}
	if r.Leftovers < 2 {
		t.Errorf("leftovers %d, want at least the temp file and the spool", r.Leftovers)
	}
	for _, n := range names[:2] {
		if _, err := c.Lookup(n); err != nil {
			t.Errorf("kept object %s: %v", n, err)
		}
	}
	if _, err := os.Stat(filepath.Join(c.Dir(), objectsDir, "README")); err != nil {
		t.Errorf("foreign file removed: %v", err)
	}
	noLeftoversExcept(t, c, "README")
	// Unreferencing everything empties the cache.
	c.Update(func(ix *Index) error { clear(ix.Entries); return nil })
	if r, err := c.GC(); err != nil || len(r.Removed) != 2 {
		t.Errorf("second GC: %+v %v", r, err)
	}
}

func noLeftoversExcept(t *testing.T, c *Cache, except string) {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(c.Dir(), objectsDir))
	for _, e := range ents {
		if !ValidName(e.Name()) && e.Name() != except {
			t.Errorf("left behind: %s", e.Name())
		}
	}
	for _, sub := range []string{locksDir, tmpDir} {
		if ents, _ := os.ReadDir(filepath.Join(c.Dir(), sub)); len(ents) != 0 {
			t.Errorf("%s/ not emptied: %v", sub, ents)
		}
	}
}
