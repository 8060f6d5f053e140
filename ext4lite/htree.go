package ext4lite

import (
	"encoding/binary"
	"fmt"
	"sort"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// buildHtree lays out d as a hashed directory: block 0 the dx root, then
// the leaves in hash order, then (for big directories) one level of
// interior index nodes. Leaves are filled completely; the kernel splits
// them as entries are added later.
func (v *FS) buildHtree(in *inode, d *dir) ([][]byte, error) {
	type hashed struct {
		leafEntry
		major, minor uint32
	}
	ents := make([]hashed, 0, len(d.entries))
	if d.hashes == nil || len(d.hashes) > 2*len(d.entries)+64 {
		d.hashes = make(map[string]uint64, len(d.entries)) // drop names long gone
	}
	for name, de := range d.entries {
		h, ok := d.hashes[name]
		if !ok {
			major, minor, ok := disk.DirHash(v.hashVersion, []byte(name), v.hashSeed)
			if !ok {
				return nil, fmt.Errorf("%w: directory hash version %d", ErrUnsupported, v.hashVersion)
			}
			h = uint64(major)<<32 | uint64(minor)
			d.hashes[name] = h
		}
		ents = append(ents, hashed{leafEntry{name, de}, uint32(h >> 32), uint32(h)})
	}
	sort.Slice(ents, func(i, j int) bool {
		a, b := ents[i], ents[j]
		if a.major != b.major {
			return a.major < b.major
		}
		if a.minor != b.minor {
			return a.minor < b.minor
		}
		return a.name < b.name
	})
	// Fill leaves; remember each leaf's first and last major hash.
	var leaves [][]leafEntry
	var firstHash, lastHash []uint32
	used := 0
	for _, e := range ents {
		rl := disk.DirentRecLen(len(e.name))
		if len(leaves) == 0 || used+rl > v.leafSpace() {
			leaves = append(leaves, nil)
			firstHash = append(firstHash, e.major)
			lastHash = append(lastHash, 0)
			used = 0
		}
		i := len(leaves) - 1
		leaves[i] = append(leaves[i], e.leafEntry)
		lastHash[i] = e.major
		used += rl
	}
	// Index keys: a leaf whose first hash continues the previous leaf's
	// last hash gets bit 0 set, so lookups go on into it.
	keys := make([]uint32, len(leaves))
	for i := range leaves {
		keys[i] = firstHash[i]
		if i > 0 && lastHash[i-1] == firstHash[i] {
			keys[i] |= 1
		}
	}
	rootLimit := disk.DxLimit(v.bs, disk.DxRootEntries, v.csum)
	nodeLimit := disk.DxLimit(v.bs, disk.DxNodeEntries, v.csum)
	blocks := make([][]byte, 1, 1+len(leaves))
	for _, l := range leaves {
		blocks = append(blocks, v.encodeLeaf(in, l, false, 0))
	}
	var rootEntries []disk.DxEntry
	levels := uint8(0)
	if len(leaves) <= rootLimit {
		for i := range leaves {
			rootEntries = append(rootEntries, disk.DxEntry{Hash: keys[i], Block: uint32(1 + i)})
		}
	} else {
		levels = 1
		nodes := (len(leaves) + nodeLimit - 1) / nodeLimit
		if nodes > rootLimit {
			return nil, fmt.Errorf("%w: directory of %d entries needs a third htree level (large_dir)", ErrNoSpace, len(ents))
		}
		for n := 0; n < nodes; n++ {
			lo, hi := n*nodeLimit, min((n+1)*nodeLimit, len(leaves))
			var es []disk.DxEntry
			for i := lo; i < hi; i++ {
				es = append(es, disk.DxEntry{Hash: keys[i], Block: uint32(1 + i)})
			}
			b := make([]byte, v.bs)
			binary.LittleEndian.PutUint32(b[0:], 0)
			binary.LittleEndian.PutUint16(b[4:], disk.EncodeRecLen(v.bs, v.bs))
			disk.PutDxEntries(b, disk.DxNodeEntries, nodeLimit, es)
			if v.csum {
				disk.PutDxTail(b, disk.DxNodeEntries, v.seedOf(in))
			}
			rootEntries = append(rootEntries, disk.DxEntry{Hash: keys[lo], Block: uint32(len(blocks))})
			blocks = append(blocks, b)
		}
	}
	root := make([]byte, v.bs)
	disk.PutDirent(root, in.ino, 12, disk.FtDir, ".")
	disk.PutDirent(root[12:], d.parent, int(disk.EncodeRecLen(v.bs-12, v.bs)), disk.FtDir, "..")
	disk.DxRootInfo{HashVersion: v.sb.DefHashVersion, InfoLength: disk.DxRootInfoLen, IndirectLevels: levels}.EncodeInto(root)
	disk.PutDxEntries(root, disk.DxRootEntries, rootLimit, rootEntries)
	if v.csum {
		disk.PutDxTail(root, disk.DxRootEntries, v.seedOf(in))
	}
	blocks[0] = root
	return blocks, nil
}
