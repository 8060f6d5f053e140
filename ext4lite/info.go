package ext4lite

import (
	"fmt"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// Info describes a volume, as `gvx-vol info` prints it.
type Info struct {
	UUID       string   `json:"uuid"`
	Label      string   `json:"label,omitempty"`
	BlockSize  int      `json:"block_size"`
	Blocks     uint64   `json:"blocks"`
	FreeBlocks uint64   `json:"free_blocks"`
	Inodes     uint32   `json:"inodes"`
	FreeInodes uint32   `json:"free_inodes"`
	Groups     uint32   `json:"groups"`
	InodeSize  int      `json:"inode_size"`
	Features   []string `json:"features"`
	Clean      bool     `json:"clean"` // cleanly closed before this open, and not truncated
	// Truncated: the file ends before the filesystem's last block (a
	// truncated or short copy); such a volume only opens read-only.
	Truncated   bool   `json:"truncated,omitempty"`
	Journal     bool   `json:"journal"`
	JournalSize uint64 `json:"journal_bytes,omitempty"`
	HashVersion uint8  `json:"htree_hash_version"`
	// JournalAborted, when not empty, says why the journal replay at this
	// open stopped before the log's last commit: the transaction named
	// failed a checksum and was discarded with the ones after it; the
	// volume is flagged with errors (s_state), as e2fsck flags it.
	JournalAborted string `json:"journal_aborted,omitempty"`
}

// Info returns the volume's geometry, counts and features. Counts reflect
// changes not yet synced.
func (v *FS) Info() (*Info, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil, ErrClosed
	}
	sb := v.sb
	u := sb.UUID
	in := &Info{
		UUID:        fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]),
		Label:       sb.VolumeLabel(),
		BlockSize:   v.bs,
		Blocks:      v.blocksCount,
		Inodes:      sb.InodesCount,
		Groups:      v.groupCount,
		InodeSize:   v.inodeSize,
		Features:    sb.FeatureNames(),
		Clean:       v.cleanAtOpen && !v.short,
		Truncated:   v.short,
		Journal:     sb.FeatureCompat&disk.CompatHasJournal != 0,
		HashVersion: sb.DefHashVersion,

		JournalAborted: v.journalAborted,
	}
	for _, g := range v.groups {
		in.FreeBlocks += uint64(g.desc.FreeBlocks())
		in.FreeInodes += g.desc.FreeInodes()
	}
	if in.Journal && sb.JournalInum != 0 {
		if j, err := v.getInode(sb.JournalInum); err == nil {
			in.JournalSize = j.d.Size()
		}
	}
	return in, nil
}
