package erofs

import (
	"fmt"

	"z.gfire.dev/gvx/erofs/internal/disk"
	"z.gfire.dev/gvx/sink"
)

// CheckResult summarizes a consistent image.
type CheckResult struct {
	Inodes      int64 `json:"inodes"`
	Directories int64 `json:"directories"`
	Entries     int64 `json:"entries"` // names, "." and ".." excluded
	DataBytes   int64 `json:"data_bytes"`
}

// Check walks the whole tree once and verifies what single lookups do not:
// every directory is reached exactly once and its "." and ".." point to
// itself and its parent, dirent file types match their inodes, link counts
// match the names found, every xattr and symlink parses, and the inode
// count matches the superblock. Each inode is read once, so the work is
// bounded by the image size whatever its bytes say, and its memory by
// ReaderOptions.MaxInodes (a *LimitError wrapping ErrTooLarge past it). A
// finding is a *FormatError wrapping ErrCorrupt.
func (im *Image) Check() (CheckResult, error) {
	var res CheckResult
	type seen struct {
		n     *rinode
		names uint32
	}
	inodes := map[uint64]*seen{}
	visit := func(nid uint64) (*seen, bool, error) {
		if s, ok := inodes[nid]; ok {
			return s, false, nil
		}
		if max := im.opts.maxInodes(); int64(len(inodes)) >= max {
			return nil, false, &LimitError{What: "inodes", Limit: max}
		}
		n, err := im.inode(nid)
		if err != nil {
			return nil, false, err
		}
		if _, err := im.xattrs(n); err != nil {
			return nil, false, err
		}
		if n.typ() == sink.TypeSymlink {
			if _, err := im.readlink(n); err != nil {
				return nil, false, err
			}
		}
		if n.typ() == sink.TypeReg {
			res.DataBytes += n.size
		}
		s := &seen{n: n}
		inodes[nid] = s
		return s, true, nil
	}
	root := uint64(im.sb.RootNid)
	rs, _, err := visit(root)
	if err != nil {
		return res, err
	}
	type job struct{ nid, parent uint64 }
	queue := []job{{root, root}}
	for len(queue) > 0 {
		j := queue[0]
		queue = queue[1:]
		dir := inodes[j.nid].n
		res.Directories++
		subdirs := uint32(0)
		var dot, dotdot bool
		err := im.dirEntries(dir, func(e rdirent) error {
			switch e.name {
			case ".":
				if e.nid != j.nid {
					return corruptf(dir.off, "directory %d: \".\" points to %d", j.nid, e.nid)
				}
				dot = true
				return nil
			case "..":
				if e.nid != j.parent {
					return corruptf(dir.off, "directory %d: \"..\" points to %d, its parent is %d", j.nid, e.nid, j.parent)
				}
				dotdot = true
				return nil
			}
			res.Entries++
			s, first, err := visit(e.nid)
			if err != nil {
				return fmt.Errorf("%q in directory %d: %w", e.name, j.nid, err)
			}
			if want := fileType(s.n.mode); e.ftype != want && e.ftype != disk.FTUnknown {
				return corruptf(dir.off, "directory %d: %q has dirent type %d, its inode type %d", j.nid, e.name, e.ftype, want)
			}
			s.names++
			if s.n.typ() == sink.TypeDir {
				if !first {
					return corruptf(s.n.off, "directory %d reached twice (a loop or a directory hard link)", e.nid)
				}
				subdirs++
				queue = append(queue, job{e.nid, j.nid})
			}
			return nil
		})
		if err != nil {
			return res, err
		}
		if !dot || !dotdot {
			return res, corruptf(dir.off, "directory %d lacks \".\" or \"..\"", j.nid)
		}
		if dir.nlink != 2+subdirs {
			return res, corruptf(dir.off, "directory %d has nlink %d, but %d subdirectories", j.nid, dir.nlink, subdirs)
		}
	}
	rs.names = 1
	for nid, s := range inodes {
		if s.n.typ() != sink.TypeDir && s.n.nlink != s.names {
			return res, corruptf(s.n.off, "inode %d has nlink %d, but %d names", nid, s.n.nlink, s.names)
		}
	}
	res.Inodes = int64(len(inodes))
	if uint64(res.Inodes) != im.sb.Inos {
		return res, corruptf(disk.SuperOffset+16, "superblock counts %d inodes, the tree has %d", im.sb.Inos, res.Inodes)
	}
	return res, nil
}
