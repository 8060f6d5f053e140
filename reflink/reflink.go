package reflink

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"z.gfire.dev/gvx/internal/durable"
)

// Mode says whether CloneFile may copy data when it cannot clone. The names
// and meanings are those of cp(1)'s --reflink=WHEN.
type Mode uint8

const (
	// Always clones or fails with an error wrapping ErrNotSupported; it
	// never copies data. It is the zero value: asking for a clone and
	// silently getting a full copy is the failure this package exists to
	// prevent.
	Always Mode = iota
	// Auto clones when the filesystem can, else makes a sparse copy.
	Auto
	// Never makes a sparse copy and never shares extents.
	Never
)

var modeNames = [...]string{Always: "always", Auto: "auto", Never: "never"}

func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", m)
}

// ParseMode parses "always", "auto" or "never" (cp's spellings).
func ParseMode(s string) (Mode, error) {
	for m, n := range modeNames {
		if s == n {
			return Mode(m), nil
		}
	}
	return 0, fmt.Errorf("reflink: unknown mode %q: want always, auto or never", s)
}

// Method says how a destination was made.
type Method uint8

const (
	// MethodClone: the destination shares the source's extents
	// (copy-on-write); no data was copied.
	MethodClone Method = iota + 1
	// MethodCopy: the data was copied, holes kept as holes.
	MethodCopy
)

func (m Method) String() string {
	switch m {
	case MethodClone:
		return "clone"
	case MethodCopy:
		return "copy"
	}
	return fmt.Sprintf("Method(%d)", m)
}

// MarshalText makes a Method print as "clone" or "copy" in JSON.
func (m Method) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText parses "clone" or "copy".
func (m *Method) UnmarshalText(b []byte) error {
	switch string(b) {
	case "clone":
		*m = MethodClone
	case "copy":
		*m = MethodCopy
	default:
		return fmt.Errorf("reflink: unknown method %q: want clone or copy", b)
	}
	return nil
}

// Options control CloneFile. The zero value clones (Mode Always), refuses to
// replace an existing destination and makes the result durable.
type Options struct {
	// Mode: Always (default), Auto or Never.
	Mode Mode
	// Overwrite allows replacing an existing regular file at dst. The
	// replacement is atomic: readers see the old file or the new one.
	Overwrite bool
	// NoSync skips the two fsyncs (of the file and of its directory), which
	// are most of a clone's latency (about 1 ms of 1.1 ms on XFS). The
	// rename stays atomic for running readers, but after a crash dst may
	// be missing, or for a copy hold zeros. Use it only for files that are
	// recreated after a crash anyway, such as an episode's scratch volume;
	// never for golden volumes or cache entries.
	NoSync bool
}

// Result describes what CloneFile did.
type Result struct {
	Method Method
	// Size is the destination's length in bytes.
	Size int64
	// Copied is the number of data bytes copied: 0 for a clone, the bytes
	// in the source's data extents (not its holes) for a copy.
	Copied int64
	// Fallback says why Mode Auto copied instead of cloning; nil otherwise.
	Fallback *NotSupportedError
}

// Clone makes dst a copy-on-write clone of src, or fails with an error
// wrapping ErrNotSupported when the filesystem cannot clone. It never copies
// data and never replaces an existing dst. It is CloneFile with the zero
// Options.
func Clone(src, dst string) error {
	_, err := CloneFile(src, dst, Options{})
	return err
}

// CloneFile makes dst a clone or sparse copy of the regular file src, as
// opts.Mode allows. dst is published atomically: the data goes to a
// temporary file in dst's directory, which is fsynced, renamed to dst (never
// over an existing file unless opts.Overwrite), and the directory is fsynced.
// On error nothing is left behind and an existing dst is untouched. dst gets
// src's permission bits (not filtered by the umask).
func CloneFile(src, dst string, opts Options) (Result, error) {
	if opts.Mode > Never {
		return Result{}, fmt.Errorf("reflink: invalid mode %v", opts.Mode)
	}
	sf, err := durable.OpenFile(src, os.O_RDONLY, 0)
	if err != nil {
		return Result{}, fmt.Errorf("reflink: %w", err)
	}
	defer sf.Close()
	sfi, err := sf.Stat()
	if err != nil {
		return Result{}, fmt.Errorf("reflink: %w", err)
	}
	if !sfi.Mode().IsRegular() {
		return Result{}, fmt.Errorf("reflink: %s: %w (%v)", src, ErrNotRegular, sfi.Mode().Type())
	}
	if err := checkDst(sfi, dst, opts.Overwrite); err != nil {
		return Result{}, err
	}
	perm := sfi.Mode().Perm()
	res := Result{Size: sfi.Size()}

	var tmp string
	var settled bool               // the mode is set and, unless NoSync or late, the data durable
	var late func(sync bool) error // the clone's fsync, due after the rename (cloneNew on XFS)
	if opts.Mode != Never {
		tmp, err = withTemp(dst, func(name string) (err error) {
			settled, late, err = cloneNew(sf, name, perm, !opts.NoSync)
			return err
		})
		if err == nil {
			res.Method = MethodClone
		} else if isNotSupported(err) {
			res.Fallback = notSupported(src, dst, err)
			if opts.Mode == Always {
				return Result{}, res.Fallback
			}
		} else {
			return Result{}, wrapErr(src, dst, err)
		}
	}
	if res.Method == 0 {
		tmp, err = withTemp(dst, func(name string) error {
			df, err := durable.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			res.Copied, err = copyData(df, sf, res.Size, opts.Mode != Never)
			if cerr := df.Close(); err == nil {
				err = cerr
			}
			return err
		})
		if err != nil {
			return Result{}, wrapErr(src, dst, err)
		}
		res.Method = MethodCopy
	}
	if err := finish(tmp, dst, perm, opts, settled, late); err != nil {
		os.Remove(tmp)
		return Result{}, wrapErr(src, dst, err)
	}
	return res, nil
}

// checkDst refuses what would go wrong later anyway, before any work: dst
// is src itself, exists without Overwrite, or is not a regular file.
func checkDst(sfi fs.FileInfo, dst string, overwrite bool) error {
	dfi, err := os.Stat(dst)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reflink: %w", err)
	}
	if os.SameFile(sfi, dfi) {
		return fmt.Errorf("reflink: %s is the source file itself", dst)
	}
	if !overwrite {
		return existErr(dst)
	}
	if !dfi.Mode().IsRegular() {
		return fmt.Errorf("reflink: refusing to replace %s: %w (%v)", dst, ErrNotRegular, dfi.Mode().Type())
	}
	return nil
}

func existErr(dst string) error {
	return fmt.Errorf("reflink: %s already exists (Overwrite replaces it): %w", dst, fs.ErrExist)
}

// withTemp calls make with a fresh temporary name beside dst
// (durable.TempName) until make does not fail with "exists", and removes
// the temporary file if make fails.
func withTemp(dst string, make func(name string) error) (string, error) {
	for range 100 {
		name := durable.TempName(dst)
		err := make(name)
		if err == nil {
			return name, nil
		}
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		os.Remove(name)
		return "", err
	}
	return "", fmt.Errorf("reflink: no free temporary name beside %s", dst)
}

// finish sets the permission bits and makes the data durable (unless
// cloneNew did: settled) and publishes tmp as dst (durable.Publish). With
// late (cloneNew on XFS) it renames, then fsyncs the clone through late
// and then dst's directory: the same fsyncs as durable.Publish's, the
// file's after the rename (see cloneNew); late closes the clone on every
// path.
func finish(tmp, dst string, perm fs.FileMode, opts Options, settled bool, late func(sync bool) error) error {
	if late != nil {
		if err := durable.Rename(tmp, dst, !opts.Overwrite); err != nil {
			late(false)
			if errors.Is(err, fs.ErrExist) {
				return existErr(dst)
			}
			return fmt.Errorf("publishing %s: %w", dst, err)
		}
		if err := late(true); err != nil {
			return fmt.Errorf("publishing %s: fsync: %w", dst, err)
		}
		return durable.SyncDir(filepath.Dir(dst))
	}
	var err error
	switch {
	case settled:
	case opts.NoSync:
		err = os.Chmod(tmp, perm)
	default:
		err = durable.SyncFile(tmp, perm)
	}
	if err != nil {
		return err
	}
	err = durable.Publish(tmp, dst, durable.Options{NoReplace: !opts.Overwrite, Synced: true, NoSync: opts.NoSync})
	if errors.Is(err, fs.ErrExist) {
		return existErr(dst)
	}
	return err
}
