// Package cache is gvx's content-addressed store of read-only image files:
// flattened EROFS root filesystems and the small JSON files kept beside
// them, shared by every episode on a host and by every process that adds to
// it.
//
// # Layout
//
//	DIR/objects/<64 hex>.<ext>   immutable objects, named by content digest
//	DIR/index.json               names (image references) → the objects they keep
//	DIR/locks/<object>.lock      one flock per object being built
//	DIR/gc.lock, DIR/index.lock  the collector's and the index's locks
//	DIR/tmp/                     spool space for builders (same filesystem)
//
// # Promises
//
//   - An object appears whole or not at all: it is written to a temporary
//     file beside its final name, fsynced, renamed into place and the
//     directory fsynced (erofs.WriteFileAtomic). Readers never see a torn
//     file and never need a lock.
//   - Many processes may ask for the same object at once: Pin.Ensure takes
//     the object's lock, so exactly one builds it and the others wait and
//     reuse it (created reports which one built it).
//   - The index is rewritten atomically under DIR/index.lock, so
//     concurrent Update calls from several processes never lose each
//     other's changes.
//   - GC removes every object no index entry names, plus the leftovers of
//     crashed builders (temporary files, spool files, lock files). It takes
//     DIR/gc.lock exclusively while every Pin holds it shared, so an object
//     that is being built or is about to be indexed is never collected.
//
// # Trust boundary
//
// Object names are validated (ValidName) before they become paths, so
// nothing from the index or a caller reaches outside DIR/objects. A damaged
// index.json is reported as ErrCorrupt, never half-applied. Other local
// users are outside: Open refuses (ErrUnsafe) a directory that is not the
// caller's or root's or that group or others may write, objects are
// published read-only (0444), and Lookup refuses an object that another
// user owns or could write (Ensure builds it again). Object bytes are not
// hashed on read: a name is a key, not the digest of the bytes.
//
// Example:
//
//	c, err := cache.Open(dir)
//	pin, err := c.Pin() // GC waits while the pin is held
//	defer pin.Close()
//	path, created, err := pin.Ensure(hexKey+".erofs", func(f *os.File) error {
//		_, err := builder.WriteTo(f)
//		return err
//	})
//	err = c.Update(func(ix *cache.Index) error {
//		ix.Entries["docker.io/library/busybox:latest"] = cache.Entry{Objects: []string{hexKey + ".erofs"}}
//		return nil
//	})
package cache
