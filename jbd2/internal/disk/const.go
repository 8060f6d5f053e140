package disk

// Magic is h_magic, the first four bytes of every journal metadata block
// (JBD2_MAGIC_NUMBER).
const Magic uint32 = 0xC03B3998

// BlockType is h_blocktype.
type BlockType uint32

// Block types (JBD2_*_BLOCK).
const (
	BlockDescriptor   BlockType = 1 // JBD2_DESCRIPTOR_BLOCK
	BlockCommit       BlockType = 2 // JBD2_COMMIT_BLOCK
	BlockSuperblockV1 BlockType = 3 // JBD2_SUPERBLOCK_V1
	BlockSuperblockV2 BlockType = 4 // JBD2_SUPERBLOCK_V2
	BlockRevoke       BlockType = 5 // JBD2_REVOKE_BLOCK
	BlockFastCommit   BlockType = 6 // JBD2_FC_BLOCK
)

// CompatFeature is a bit of s_feature_compat.
type CompatFeature uint32

// IncompatFeature is a bit of s_feature_incompat.
type IncompatFeature uint32

// RoCompatFeature is a bit of s_feature_ro_compat (none are defined).
type RoCompatFeature uint32

// Feature bits (JBD2_FEATURE_*).
const (
	CompatChecksum CompatFeature = 0x1 // JBD2_FEATURE_COMPAT_CHECKSUM: v1 crc32 in commit blocks

	IncompatRevoke      IncompatFeature = 0x1  // JBD2_FEATURE_INCOMPAT_REVOKE
	Incompat64Bit       IncompatFeature = 0x2  // JBD2_FEATURE_INCOMPAT_64BIT
	IncompatAsyncCommit IncompatFeature = 0x4  // JBD2_FEATURE_INCOMPAT_ASYNC_COMMIT
	IncompatCsumV2      IncompatFeature = 0x8  // JBD2_FEATURE_INCOMPAT_CSUM_V2
	IncompatCsumV3      IncompatFeature = 0x10 // JBD2_FEATURE_INCOMPAT_CSUM_V3
	IncompatFastCommit  IncompatFeature = 0x20 // JBD2_FEATURE_INCOMPAT_FAST_COMMIT
)

// Checksum types (s_checksum_type, h_chksum_type).
const (
	ChecksumCRC32  = 1 // JBD2_CRC32_CHKSUM
	ChecksumMD5    = 2 // JBD2_MD5_CHKSUM
	ChecksumSHA1   = 3 // JBD2_SHA1_CHKSUM
	ChecksumCRC32C = 4 // JBD2_CRC32C_CHKSUM
)

// Tag flags (t_flags, JBD2_FLAG_*).
const (
	FlagEscape   = 0x1 // JBD2_FLAG_ESCAPE: the block started with Magic, stored zeroed
	FlagSameUUID = 0x2 // JBD2_FLAG_SAME_UUID: no 16-byte UUID follows the tag
	FlagDeleted  = 0x4 // JBD2_FLAG_DELETED: block deleted by this transaction
	FlagLastTag  = 0x8 // JBD2_FLAG_LAST_TAG: last tag of the descriptor block
)

// Sizes of the fixed structures, in bytes.
const (
	SuperblockSize = 1024 // sizeof(journal_superblock_t)
	HeaderSize     = 12   // sizeof(journal_header_t)
	CommitSize     = 60   // sizeof(struct commit_header)
	RevokeHdrSize  = 16   // sizeof(jbd2_journal_revoke_header_t)
	TailSize       = 4    // sizeof(struct jbd2_journal_block_tail)
	Tag3Size       = 16   // sizeof(journal_block_tag3_t)
	TagSize        = 12   // sizeof(journal_block_tag_t)
	UUIDSize       = 16
	MaxUsers       = 48 // JBD2_USERS_MAX
)

// MinBlocks is the smallest journal the kernel loads (JBD2_MIN_JOURNAL_BLOCKS).
const MinBlocks = 1024
