// Package durable is the one way gvx publishes a file or a directory so
// that a crash leaves either the old one or the whole new one: the data
// goes to a temporary name beside the target, which is fsynced, renamed to
// the target (or, with Options.NoReplace, never over an existing one), and
// the directory is fsynced, making the rename itself durable. On any error
// the temporary is removed and an existing target is untouched.
//
// WriteFile does it all for a file written by a function; CreateTemp and
// Temp.Publish for a file whose name is known only after writing (a
// content-addressed blob); TempName and Publish for a file or directory
// some other code creates (an ext4 volume, a clone, an OCI layout).
//
// It builds for every GOOS gvx's storage packages build for. On Windows a
// directory cannot be fsynced; NTFS journals the rename itself.
package durable

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// Options control Publish, Temp.Publish and WriteFile. The zero value
// replaces an existing target and fsyncs both the data and the directory.
type Options struct {
	// NoReplace refuses to replace an existing target: the error wraps
	// fs.ErrExist, the target is untouched. The check is the rename
	// itself (renameat2 RENAME_NOREPLACE, renamex_np RENAME_EXCL,
	// MoveFileEx without REPLACE_EXISTING, or a hard link), not a
	// separate look, except on a filesystem with none of those.
	NoReplace bool
	// Synced says the caller has made the data durable already (an
	// ext4lite volume's Close, a clone that fsynced its descriptor, a
	// tree fsynced file by file): Publish skips the fsync of tmp.
	Synced bool
	// NoSync skips both fsyncs. The rename stays atomic for running
	// readers, but after a crash the target may be missing or hold zeros:
	// only for files that are recreated after a crash anyway.
	NoSync bool
}

// TempName returns a fresh temporary name beside final,
// ".BASE.tmp-RANDOM". It creates nothing: create it exclusively (O_EXCL)
// and pick another name if it exists. The random part is math/rand's, not
// crypto/rand's, whose first kernel read costs a process its runtime's
// poller; exclusive creation makes any name safe, whoever guessed it.
func TempName(final string) string {
	dir, base := filepath.Split(final)
	return filepath.Join(dir, fmt.Sprintf(".%s.tmp-%012x", base, rand.Uint64()&(1<<48-1)))
}

// Publish makes tmp (a file or a directory beside final, on the same
// filesystem) final: it fsyncs tmp unless o.Synced or o.NoSync, renames
// it to final (refusing an existing final with o.NoReplace) and fsyncs
// final's directory unless o.NoSync. On error tmp is removed if it is a
// file or an empty directory (a tree is the caller's to remove) and an
// existing final is untouched. Errors name the paths.
func Publish(tmp, final string, o Options) (err error) {
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if !o.Synced && !o.NoSync {
		if err := syncPath(tmp); err != nil {
			return fmt.Errorf("publishing %s: fsync %s: %w", final, tmp, err)
		}
	}
	if err := Rename(tmp, final, o.NoReplace); err != nil {
		return fmt.Errorf("publishing %s: %w", final, err)
	}
	if o.NoSync {
		return nil
	}
	return SyncDir(filepath.Dir(final))
}

// Rename renames oldpath to newpath, atomically for readers. With
// noReplace it fails with an error wrapping fs.ErrExist instead of
// replacing an existing newpath.
func Rename(oldpath, newpath string, noReplace bool) error {
	if !noReplace {
		return os.Rename(oldpath, newpath)
	}
	err := renameNoReplace(oldpath, newpath)
	if !errors.Is(err, errors.ErrUnsupported) {
		return err
	}
	// The filesystem has no exclusive rename: a hard link publishes
	// without replacing what appeared meanwhile, and newpath is whole
	// whatever becomes of oldpath.
	if err = os.Link(oldpath, newpath); err == nil {
		os.Remove(oldpath)
		return nil
	}
	if errors.Is(err, fs.ErrExist) {
		return err
	}
	// No hard links either: look, then rename.
	if _, err := os.Lstat(newpath); err == nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: fs.ErrExist}
	}
	return os.Rename(oldpath, newpath)
}

// SyncFile sets name's permission bits to perm (not filtered by the
// umask) and fsyncs it.
func SyncFile(name string, perm fs.FileMode) error {
	f, err := openForSync(name)
	if err != nil {
		return err
	}
	err = settle(f, perm)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync %s: %w", name, err)
	}
	return nil
}

// syncPath fsyncs a file or a directory (its entries, not its tree).
func syncPath(name string) error {
	f, err := openForSync(name)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// SyncDir fsyncs directory dir, making a rename or create in it durable.
// On Windows it does nothing: a directory cannot be opened for sync there
// and NTFS journals the rename itself.
func SyncDir(dir string) error {
	if !dirSync {
		return nil
	}
	if err := syncPath(dir); err != nil {
		return fmt.Errorf("fsync of directory %s: %w", dir, err)
	}
	return nil
}

// Temp is a new temporary file beside its target, for data whose
// target's name may be known only once written. Publish it, or Discard it
// (deferred Discard after Publish does nothing).
type Temp struct {
	*os.File
	done bool
}

// CreateTemp creates a new empty temporary file (mode 0600) beside final,
// named as TempName says.
func CreateTemp(final string) (*Temp, error) {
	for range 100 {
		f, err := OpenFile(TempName(final), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			return &Temp{File: f}, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("no free temporary name beside %s", final)
}

// Publish sets the file's permission bits to perm (not filtered by the
// umask), fsyncs and closes it, and publishes it as final, which must be
// in the same directory (see the package Publish). On error the
// temporary file is gone.
func (t *Temp) Publish(final string, perm fs.FileMode, o Options) error {
	if t.done {
		return fmt.Errorf("publishing %s: %s was published or discarded already", final, t.Name())
	}
	t.done = true
	var err error
	if o.NoSync || o.Synced {
		err = t.Chmod(perm)
	} else {
		err = settle(t.File, perm)
	}
	if cerr := t.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(t.Name())
		return fmt.Errorf("publishing %s: %s: %w", final, t.Name(), err)
	}
	o.Synced = true
	return Publish(t.Name(), final, o)
}

// Discard closes and removes the temporary file unless it was published.
func (t *Temp) Discard() {
	if t.done {
		return
	}
	t.done = true
	t.Close()
	os.Remove(t.Name())
}

// WriteFile publishes path with perm (not filtered by the umask) and what
// write puts in a temporary file beside it. write must not close f. If
// write fails its error is returned as it is and nothing is left behind.
func WriteFile(path string, perm fs.FileMode, o Options, write func(f *os.File) error) error {
	t, err := CreateTemp(path)
	if err != nil {
		return fmt.Errorf("publishing %s: %w", path, err)
	}
	defer t.Discard()
	if err := write(t.File); err != nil {
		return err
	}
	return t.Publish(path, perm, o)
}
