package ext4lite

import (
	"io"
	"strings"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
	"z.gfire.dev/gvx/sink"
)

// validLinkname reports whether a symlink may point at target: not empty,
// shorter than a block, and no NUL. symlink(2) takes a C string, so no
// Linux link holds one; only a hand-made lisafs request could. The kernel
// and e2fsck take a target to end at its first NUL, so i_size would
// disagree with it (a corrupt inode), and no tar could carry it (the
// volume's export would fail at it).
func (v *FS) validLinkname(target string) bool {
	return len(target) > 0 && len(target) < v.bs && strings.IndexByte(target, 0) < 0
}

// writeSymlink stores target as the new symlink in's body, the one writer
// of it: a target of up to disk.FastSymlinkMax (59) bytes is a fast
// symlink, held in i_block itself, as the kernel writes it (its limit is
// i_block's 60 bytes with the NUL); a longer one goes in one data block
// mapped by an extent tree. readlink reads either back.
func (v *FS) writeSymlink(in *inode, target string) error {
	if len(target) <= disk.FastSymlinkMax {
		copy(in.d.Block[:], target)
		in.d.SetSize(uint64(len(target)))
		return nil
	}
	in.d.Flags |= disk.FlagExtents
	in.ext = &extentMap{dirty: true}
	return v.writeData(in, []byte(target), 0, false)
}

// Symlink creates a symbolic link (sink.Sink): fast (in the inode) below
// 60 bytes, else in a data block (writeSymlink).
func (v *FS) Symlink(h *sink.Header) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.beginOp(); err != nil {
		return err
	}
	if err := v.checkHeaderXattrs(h); err != nil {
		return pathErr("symlink", h.Path, err)
	}
	if !v.validLinkname(h.Linkname) {
		return pathErr("symlink", h.Path, errInvalid)
	}
	pin, d, name, _, err := v.prepareCreate(h.Path, disk.ModeSymlink)
	if err != nil {
		return pathErr("symlink", h.Path, err)
	}
	in, err := v.create(pin, d, name, disk.ModeSymlink, h)
	if err != nil {
		return pathErr("symlink", h.Path, err)
	}
	hh := *h
	hh.Mode = 0o777
	return v.applyHeader(in, &hh)
}

// ReadlinkIno returns a symlink's target.
func (v *FS) ReadlinkIno(ino Ino) (string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	in, err := v.inoLocked(ino)
	if err != nil {
		return "", err
	}
	if in.fileType() != disk.ModeSymlink {
		return "", errInvalid
	}
	return v.readlink(in)
}

func (v *FS) readlink(in *inode) (string, error) {
	size := in.d.Size()
	if size == 0 || size >= uint64(v.bs) {
		return "", corruptf(-1, in.ino, "symlink of %d bytes", size)
	}
	if in.d.Flags&disk.FlagExtents == 0 && size <= disk.FastSymlinkMax {
		return string(in.d.Block[:size]), nil
	}
	b := make([]byte, size)
	if _, err := v.readData(in, b, 0); err != nil && err != io.EOF {
		return "", err
	}
	return string(b), nil
}

// Readlink returns a symlink's target.
func (v *FS) Readlink(p string) (string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	in, err := v.lookupFor("readlink", p)
	if err != nil {
		return "", err
	}
	if in.fileType() != disk.ModeSymlink {
		return "", pathErr("readlink", p, errInvalid)
	}
	return v.readlink(in)
}
