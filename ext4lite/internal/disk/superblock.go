package disk

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
)

// Superblock geometry.
const (
	SuperblockOffset = 1024   // byte offset of the primary superblock
	SuperblockSize   = 1024   // bytes
	Magic            = 0xEF53 // s_magic
	BadBlocksIno     = 1      // EXT4_BAD_INO
	RootIno          = 2      // EXT4_ROOT_INO
	ResizeIno        = 7      // EXT4_RESIZE_INO: maps the reserved GDT blocks (resize_inode)
	JournalIno       = 8      // EXT4_JOURNAL_INO
	GoodOldFirstIno  = 11     // first non-reserved inode
	MaxNameLen       = 255    // EXT4_NAME_LEN
	MaxLinks         = 65000  // EXT4_LINK_MAX
)

// s_state bits.
const (
	StateValid  = 0x1 // EXT4_VALID_FS: cleanly unmounted
	StateErrors = 0x2 // EXT4_ERROR_FS
)

// s_flags bits.
const (
	FlagSignedHash   = 0x1
	FlagUnsignedHash = 0x2
)

// Checksum types (s_checksum_type).
const ChecksumCRC32c = 1

// Superblock is struct ext4_super_block (fs/ext4/ext4.h), 1024 bytes.
type Superblock struct {
	InodesCount       uint32     // s_inodes_count
	BlocksCountLo     uint32     // s_blocks_count_lo
	RBlocksCountLo    uint32     // s_r_blocks_count_lo
	FreeBlocksCountLo uint32     // s_free_blocks_count_lo
	FreeInodesCount   uint32     // s_free_inodes_count
	FirstDataBlock    uint32     // s_first_data_block
	LogBlockSize      uint32     // s_log_block_size
	LogClusterSize    uint32     // s_log_cluster_size
	BlocksPerGroup    uint32     // s_blocks_per_group
	ClustersPerGroup  uint32     // s_clusters_per_group
	InodesPerGroup    uint32     // s_inodes_per_group
	Mtime             uint32     // s_mtime
	Wtime             uint32     // s_wtime
	MntCount          uint16     // s_mnt_count
	MaxMntCount       int16      // s_max_mnt_count
	Magic             uint16     // s_magic
	State             uint16     // s_state
	Errors            uint16     // s_errors
	MinorRevLevel     uint16     // s_minor_rev_level
	Lastcheck         uint32     // s_lastcheck
	Checkinterval     uint32     // s_checkinterval
	CreatorOS         uint32     // s_creator_os
	RevLevel          uint32     // s_rev_level
	DefResuid         uint16     // s_def_resuid
	DefResgid         uint16     // s_def_resgid
	FirstIno          uint32     // s_first_ino
	InodeSize         uint16     // s_inode_size
	BlockGroupNr      uint16     // s_block_group_nr
	FeatureCompat     Compat     // s_feature_compat
	FeatureIncompat   Incompat   // s_feature_incompat
	FeatureROCompat   ROCompat   // s_feature_ro_compat
	UUID              [16]byte   // s_uuid
	VolumeName        [16]byte   // s_volume_name
	LastMounted       [64]byte   // s_last_mounted
	AlgorithmUsageBmp uint32     // s_algorithm_usage_bitmap
	PreallocBlocks    uint8      // s_prealloc_blocks
	PreallocDirBlocks uint8      // s_prealloc_dir_blocks
	ReservedGdtBlocks uint16     // s_reserved_gdt_blocks
	JournalUUID       [16]byte   // s_journal_uuid
	JournalInum       uint32     // s_journal_inum
	JournalDev        uint32     // s_journal_dev
	LastOrphan        uint32     // s_last_orphan
	HashSeed          [4]uint32  // s_hash_seed
	DefHashVersion    uint8      // s_def_hash_version
	JnlBackupType     uint8      // s_jnl_backup_type
	DescSize          uint16     // s_desc_size
	DefaultMountOpts  uint32     // s_default_mount_opts
	FirstMetaBg       uint32     // s_first_meta_bg
	MkfsTime          uint32     // s_mkfs_time
	JnlBlocks         [17]uint32 // s_jnl_blocks: i_block[15], i_size_high, i_size
	BlocksCountHi     uint32     // s_blocks_count_hi
	RBlocksCountHi    uint32     // s_r_blocks_count_hi
	FreeBlocksCountHi uint32     // s_free_blocks_count_hi
	MinExtraIsize     uint16     // s_min_extra_isize
	WantExtraIsize    uint16     // s_want_extra_isize
	Flags             uint32     // s_flags
	RaidStride        uint16     // s_raid_stride
	MmpInterval       uint16     // s_mmp_interval
	MmpBlock          uint64     // s_mmp_block
	RaidStripeWidth   uint32     // s_raid_stripe_width
	LogGroupsPerFlex  uint8      // s_log_groups_per_flex
	ChecksumType      uint8      // s_checksum_type
	EncryptionLevel   uint8      // s_encryption_level
	ReservedPad       uint8      // s_reserved_pad
	KbytesWritten     uint64     // s_kbytes_written
	SnapshotInum      uint32     // s_snapshot_inum
	SnapshotID        uint32     // s_snapshot_id
	SnapshotRBlocks   uint64     // s_snapshot_r_blocks_count
	SnapshotList      uint32     // s_snapshot_list
	ErrorCount        uint32     // s_error_count
	FirstErrorTime    uint32     // s_first_error_time
	FirstErrorIno     uint32     // s_first_error_ino
	FirstErrorBlock   uint64     // s_first_error_block
	FirstErrorFunc    [32]byte   // s_first_error_func
	FirstErrorLine    uint32     // s_first_error_line
	LastErrorTime     uint32     // s_last_error_time
	LastErrorIno      uint32     // s_last_error_ino
	LastErrorLine     uint32     // s_last_error_line
	LastErrorBlock    uint64     // s_last_error_block
	LastErrorFunc     [32]byte   // s_last_error_func
	MountOpts         [64]byte   // s_mount_opts
	UsrQuotaInum      uint32     // s_usr_quota_inum
	GrpQuotaInum      uint32     // s_grp_quota_inum
	OverheadClusters  uint32     // s_overhead_clusters
	BackupBgs         [2]uint32  // s_backup_bgs
	EncryptAlgos      [4]uint8   // s_encrypt_algos
	EncryptPwSalt     [16]byte   // s_encrypt_pw_salt
	LpfIno            uint32     // s_lpf_ino
	PrjQuotaInum      uint32     // s_prj_quota_inum
	ChecksumSeed      uint32     // s_checksum_seed
	WtimeHi           uint8      // s_wtime_hi
	MtimeHi           uint8      // s_mtime_hi
	MkfsTimeHi        uint8      // s_mkfs_time_hi
	LastcheckHi       uint8      // s_lastcheck_hi
	FirstErrorTimeHi  uint8      // s_first_error_time_hi
	LastErrorTimeHi   uint8      // s_last_error_time_hi
	FirstErrorErrcode uint8      // s_first_error_errcode
	LastErrorErrcode  uint8      // s_last_error_errcode
	Encoding          uint16     // s_encoding
	EncodingFlags     uint16     // s_encoding_flags
	OrphanFileInum    uint32     // s_orphan_file_inum
	Reserved          [94]uint32 // s_reserved
	Checksum          uint32     // s_checksum
}

// DecodeSuperblock parses 1024 bytes. It checks nothing beyond length;
// validation is the caller's (it knows the file size).
func DecodeSuperblock(b []byte) (*Superblock, error) {
	if len(b) < SuperblockSize {
		return nil, fmt.Errorf("superblock: %d bytes, want %d", len(b), SuperblockSize)
	}
	sb := new(Superblock)
	if _, err := binary.Decode(b[:SuperblockSize], binary.LittleEndian, sb); err != nil {
		return nil, err
	}
	return sb, nil
}

// Encode returns the 1024 bytes of sb, with s_checksum recomputed when
// metadata_csum is on.
func (sb *Superblock) Encode() []byte {
	b := make([]byte, SuperblockSize)
	if _, err := binary.Encode(b, binary.LittleEndian, sb); err != nil {
		panic(err) // fixed-size struct: cannot fail
	}
	if sb.FeatureROCompat&ROCompatMetadataCsum != 0 {
		sb.Checksum = SuperblockChecksum(b)
		binary.LittleEndian.PutUint32(b[SuperblockSize-4:], sb.Checksum)
	}
	return b
}

// SuperblockChecksum is crc32c(~0) over the superblock up to s_checksum.
func SuperblockChecksum(b []byte) uint32 { return CRC32c(^uint32(0), b[:SuperblockSize-4]) }

// BlocksCount is the 64-bit s_blocks_count.
func (sb *Superblock) BlocksCount() uint64 {
	return uint64(sb.BlocksCountHi)<<32 | uint64(sb.BlocksCountLo)
}

// SetBlocksCount stores the 64-bit s_blocks_count.
func (sb *Superblock) SetBlocksCount(n uint64) {
	sb.BlocksCountLo, sb.BlocksCountHi = uint32(n), uint32(n>>32)
}

// FreeBlocksCount is the 64-bit s_free_blocks_count.
func (sb *Superblock) FreeBlocksCount() uint64 {
	return uint64(sb.FreeBlocksCountHi)<<32 | uint64(sb.FreeBlocksCountLo)
}

// SetFreeBlocksCount stores the 64-bit s_free_blocks_count.
func (sb *Superblock) SetFreeBlocksCount(n uint64) {
	sb.FreeBlocksCountLo, sb.FreeBlocksCountHi = uint32(n), uint32(n>>32)
}

// RBlocksCount is the 64-bit s_r_blocks_count.
func (sb *Superblock) RBlocksCount() uint64 {
	return uint64(sb.RBlocksCountHi)<<32 | uint64(sb.RBlocksCountLo)
}

// SetRBlocksCount stores the 64-bit s_r_blocks_count.
func (sb *Superblock) SetRBlocksCount(n uint64) {
	sb.RBlocksCountLo, sb.RBlocksCountHi = uint32(n), uint32(n>>32)
}

// HasSuperBackup reports whether group g holds a copy of the superblock
// (and group descriptors): group 0 always; with sparse_super2 only the
// groups in s_backup_bgs; with sparse_super groups 1 and the powers of 3,
// 5 and 7; without either, every group.
func (sb *Superblock) HasSuperBackup(g uint32) bool {
	if g == 0 {
		return true
	}
	if sb.FeatureCompat&CompatSparseSuper2 != 0 {
		return g == sb.BackupBgs[0] || g == sb.BackupBgs[1]
	}
	if sb.FeatureROCompat&ROCompatSparseSuper == 0 || g == 1 {
		return true
	}
	for _, base := range []uint32{3, 5, 7} {
		n := base
		for n < g {
			n *= base
		}
		if n == g {
			return true
		}
	}
	return false
}

// BlockSize is 1024 << s_log_block_size (callers validate the exponent).
func (sb *Superblock) BlockSize() int { return 1024 << sb.LogBlockSize }

// VolumeLabel returns s_volume_name as a string.
func (sb *Superblock) VolumeLabel() string {
	return string(bytes.TrimRight(sb.VolumeName[:], "\x00"))
}

// Compat is s_feature_compat.
type Compat uint32

// Incompat is s_feature_incompat.
type Incompat uint32

// ROCompat is s_feature_ro_compat.
type ROCompat uint32

// Compatible features.
const (
	CompatDirPrealloc   Compat = 0x1
	CompatImagicInodes  Compat = 0x2
	CompatHasJournal    Compat = 0x4
	CompatExtAttr       Compat = 0x8
	CompatResizeInode   Compat = 0x10
	CompatDirIndex      Compat = 0x20
	CompatLazyBG        Compat = 0x40
	CompatExcludeBitmap Compat = 0x100
	CompatSparseSuper2  Compat = 0x200
	CompatFastCommit    Compat = 0x400
	CompatStableInodes  Compat = 0x800
	CompatOrphanFile    Compat = 0x1000
)

// Incompatible features.
const (
	IncompatCompression Incompat = 0x1
	IncompatFiletype    Incompat = 0x2
	IncompatRecover     Incompat = 0x4
	IncompatJournalDev  Incompat = 0x8
	IncompatMetaBG      Incompat = 0x10
	IncompatExtents     Incompat = 0x40
	Incompat64bit       Incompat = 0x80
	IncompatMMP         Incompat = 0x100
	IncompatFlexBG      Incompat = 0x200
	IncompatEAInode     Incompat = 0x400
	IncompatDirData     Incompat = 0x1000
	IncompatCsumSeed    Incompat = 0x2000
	IncompatLargedir    Incompat = 0x4000
	IncompatInlineData  Incompat = 0x8000
	IncompatEncrypt     Incompat = 0x10000
	IncompatCasefold    Incompat = 0x20000
)

// Read-only compatible features.
const (
	ROCompatSparseSuper   ROCompat = 0x1
	ROCompatLargeFile     ROCompat = 0x2
	ROCompatBtreeDir      ROCompat = 0x4
	ROCompatHugeFile      ROCompat = 0x8
	ROCompatGdtCsum       ROCompat = 0x10
	ROCompatDirNlink      ROCompat = 0x20
	ROCompatExtraIsize    ROCompat = 0x40
	ROCompatHasSnapshot   ROCompat = 0x80
	ROCompatQuota         ROCompat = 0x100
	ROCompatBigalloc      ROCompat = 0x200
	ROCompatMetadataCsum  ROCompat = 0x400
	ROCompatReplica       ROCompat = 0x800
	ROCompatReadonly      ROCompat = 0x1000
	ROCompatProject       ROCompat = 0x2000
	ROCompatSharedBlocks  ROCompat = 0x4000
	ROCompatVerity        ROCompat = 0x8000
	ROCompatOrphanPresent ROCompat = 0x10000
)

// Feature names as e2fsprogs prints them (lib/e2p/feature.c).
var (
	compatNames = map[Compat]string{
		CompatDirPrealloc: "dir_prealloc", CompatImagicInodes: "imagic_inodes",
		CompatHasJournal: "has_journal", CompatExtAttr: "ext_attr",
		CompatResizeInode: "resize_inode", CompatDirIndex: "dir_index",
		CompatLazyBG: "lazy_bg", CompatExcludeBitmap: "snapshot_bitmap",
		CompatSparseSuper2: "sparse_super2", CompatFastCommit: "fast_commit",
		CompatStableInodes: "stable_inodes", CompatOrphanFile: "orphan_file",
	}
	incompatNames = map[Incompat]string{
		IncompatCompression: "compression", IncompatFiletype: "filetype",
		IncompatRecover: "needs_recovery", IncompatJournalDev: "journal_dev",
		IncompatMetaBG: "meta_bg", IncompatExtents: "extent", Incompat64bit: "64bit",
		IncompatMMP: "mmp", IncompatFlexBG: "flex_bg", IncompatEAInode: "ea_inode",
		IncompatDirData: "dirdata", IncompatCsumSeed: "metadata_csum_seed",
		IncompatLargedir: "large_dir", IncompatInlineData: "inline_data",
		IncompatEncrypt: "encrypt", IncompatCasefold: "casefold",
	}
	roCompatNames = map[ROCompat]string{
		ROCompatSparseSuper: "sparse_super", ROCompatLargeFile: "large_file",
		ROCompatBtreeDir: "btree_dir", ROCompatHugeFile: "huge_file",
		ROCompatGdtCsum: "uninit_bg", ROCompatDirNlink: "dir_nlink",
		ROCompatExtraIsize: "extra_isize", ROCompatHasSnapshot: "snapshot",
		ROCompatQuota: "quota", ROCompatBigalloc: "bigalloc",
		ROCompatMetadataCsum: "metadata_csum", ROCompatReplica: "replica",
		ROCompatReadonly: "read-only", ROCompatProject: "project",
		ROCompatSharedBlocks: "shared_blocks", ROCompatVerity: "verity",
		ROCompatOrphanPresent: "orphan_present",
	}
)

func names[T ~uint32](v T, m map[T]string) []string {
	var out []string
	for bit := T(1); bit != 0; bit <<= 1 {
		if v&bit == 0 {
			continue
		}
		if n, ok := m[bit]; ok {
			out = append(out, n)
		} else {
			out = append(out, fmt.Sprintf("FEATURE_%#x", uint32(bit)))
		}
	}
	return out
}

// Names lists the compat features set in c.
func (c Compat) Names() []string { return names(c, compatNames) }

// Names lists the incompat features set in c.
func (c Incompat) Names() []string { return names(c, incompatNames) }

// Names lists the ro_compat features set in c.
func (c ROCompat) Names() []string { return names(c, roCompatNames) }

// FeatureNames lists every feature of sb in dumpe2fs's order (compat,
// incompat, ro_compat).
func (sb *Superblock) FeatureNames() []string {
	out := sb.FeatureCompat.Names()
	out = append(out, sb.FeatureIncompat.Names()...)
	return append(out, sb.FeatureROCompat.Names()...)
}

// String renders a feature list as dumpe2fs does.
func FeatureString(n []string) string { return strings.Join(n, " ") }
