package ext4lite

import (
	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// touch sets a directory's mtime and ctime after its entries changed.
func (v *FS) touch(in *inode) {
	t := v.opts.now()
	in.d.Mtime, in.d.MtimeExtra = disk.EncodeTime(t)
	in.d.Ctime, in.d.CtimeExtra = disk.EncodeTime(t)
	in.dirty = true
}

func (v *FS) touchCtime(in *inode) {
	in.d.Ctime, in.d.CtimeExtra = disk.EncodeTime(v.opts.now())
	in.dirty = true
}
