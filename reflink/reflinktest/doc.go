// Package reflinktest mounts real filesystems for tests: an image made by the
// filesystem's own mkfs in a sparse file under t.TempDir(), loop-mounted,
// or a tmpfs; everything is unmounted and detached in t.Cleanup. It needs
// root and the mkfs tools, and skips the test, saying why, without them.
// Linux only; elsewhere Mount skips.
//
//	mnt := reflinktest.Mount(t, "xfs") // mkfs.xfs -m reflink=1
package reflinktest
