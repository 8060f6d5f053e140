package ext4lite

import "z.gfire.dev/gvx/ext4lite/internal/disk"

// The orphan list (s_last_orphan, chained through i_dtime) holds inodes
// that lost their last link while still open, as Linux keeps it: after a
// crash, the next read-write open (or e2fsck) frees them.

func (v *FS) addOrphan(in *inode) {
	in.d.Dtime = v.sb.LastOrphan
	v.sb.LastOrphan = in.ino
	in.dirty = true
}

// removeOrphan unlinks in from the chain.
func (v *FS) removeOrphan(in *inode) error {
	if v.sb.LastOrphan == in.ino {
		v.sb.LastOrphan = in.d.Dtime
		in.d.Dtime = 0
		return nil
	}
	for cur, n := v.sb.LastOrphan, uint32(0); cur != 0 && n < v.sb.InodesCount; n++ {
		p, err := v.getInode(cur)
		if err != nil {
			return err
		}
		if p.d.Dtime == in.ino {
			p.d.Dtime = in.d.Dtime
			p.dirty = true
			in.d.Dtime = 0
			return nil
		}
		cur = p.d.Dtime
	}
	return corruptf(-1, in.ino, "orphan not on the orphan list")
}

// cleanOrphans frees the inodes a crash left on the orphan list.
func (v *FS) cleanOrphans() error {
	seen := 0
	for ino := v.sb.LastOrphan; ino != 0; {
		if seen++; uint32(seen) > v.sb.InodesCount {
			return corruptf(disk.SuperblockOffset, 0, "orphan list loops")
		}
		in, err := v.getInode(ino)
		if err != nil {
			return err
		}
		if in.d.LinksCount != 0 {
			return corruptf(-1, ino, "inode on the orphan list has %d links", in.d.LinksCount)
		}
		next := in.d.Dtime
		v.sb.LastOrphan = next
		in.d.Dtime = 0
		if err := v.release(in); err != nil {
			return err
		}
		ino = next
	}
	return nil
}

// releaseOrphans frees every open-but-unlinked inode (at Close: the
// references die with the volume).
func (v *FS) releaseOrphans() error {
	v.refs = nil
	for v.sb.LastOrphan != 0 {
		in, err := v.getInode(v.sb.LastOrphan)
		if err != nil {
			return err
		}
		if err := v.removeOrphan(in); err != nil {
			return err
		}
		in.orphan = false
		if err := v.release(in); err != nil {
			return err
		}
	}
	return nil
}

// The orphan file (orphan_file, made by mke2fs ≥ 1.47) is not used for
// ext4lite's own orphans, which go on the chain above (the kernel reads
// both); a read-write open is refused while it lists any (orphan_present,
// loadSuperblock). Only moving its blocks (Shrink) has to know it.

// isOrphanFile reports whether ino is the orphan file's inode.
func (v *FS) isOrphanFile(ino uint32) bool {
	return v.sb.FeatureCompat&disk.CompatOrphanFile != 0 && ino == v.sb.OrphanFileInum
}

// resealOrphanBlock fixes the checksum of orphan file block b, copied
// from physical block from to to: the checksum covers the block number.
// A block that was not valid where it was is left as it is.
func (v *FS) resealOrphanBlock(in *inode, b []byte, from, to uint64) {
	if !v.csum {
		return
	}
	ob, err := disk.DecodeOrphanBlock(b)
	seed := disk.InodeSeed(v.seed, in.ino, in.d.Generation)
	if err != nil || ob.Valid(true, seed, from) != "" {
		return
	}
	ob.SetChecksum(seed, to)
}
