package disk

// Superblock is journal_superblock_t, block 0 of the journal (v2 layout; a v1
// superblock has the same first 0x24 bytes and no features).
type Superblock struct {
	Header                 // s_header
	BlockSize       uint32 // s_blocksize
	MaxLen          uint32 // s_maxlen: total blocks in the journal
	First           uint32 // s_first: first block of log information
	Sequence        uint32 // s_sequence: first commit ID expected in the log
	Start           uint32 // s_start: block of the log's start; 0 = clean
	Errno           int32  // s_errno
	FeatureCompat   CompatFeature
	FeatureIncompat IncompatFeature
	FeatureRoCompat RoCompatFeature
	UUID            [16]byte            // s_uuid
	NrUsers         uint32              // s_nr_users
	DynSuper        uint32              // s_dynsuper
	MaxTransaction  uint32              // s_max_transaction
	MaxTransData    uint32              // s_max_trans_data
	ChecksumType    uint8               // s_checksum_type
	Padding2        [3]uint8            // s_padding2
	NumFCBlks       uint32              // s_num_fc_blks: fast-commit blocks
	Head            uint32              // s_head: head of the log when it was last cleaned
	Padding         [40]uint32          // s_padding
	Checksum        uint32              // s_checksum: crc32c(~0, superblock with this field 0)
	Users           [16 * MaxUsers]byte // s_users
}

// Byte offsets of superblock fields.
const (
	SbOffBlockSize    = 0x0C
	SbOffMaxLen       = 0x10
	SbOffFirst        = 0x14
	SbOffSequence     = 0x18
	SbOffStart        = 0x1C
	SbOffErrno        = 0x20
	SbOffCompat       = 0x24
	SbOffIncompat     = 0x28
	SbOffRoCompat     = 0x2C
	SbOffUUID         = 0x30
	SbOffNrUsers      = 0x40
	SbOffDynSuper     = 0x44
	SbOffMaxTrans     = 0x48
	SbOffMaxTransData = 0x4C
	SbOffChecksumType = 0x50
	SbOffNumFCBlks    = 0x54
	SbOffHead         = 0x58
	SbOffPadding      = 0x5C
	SbOffChecksum     = 0xFC
	SbOffUsers        = 0x100
)

// Marshal writes sb into p[:SuperblockSize]. It does not compute the
// checksum; see SetChecksum.
func (sb *Superblock) Marshal(p []byte) {
	_ = p[SuperblockSize-1]
	sb.Header.Marshal(p)
	be.PutUint32(p[SbOffBlockSize:], sb.BlockSize)
	be.PutUint32(p[SbOffMaxLen:], sb.MaxLen)
	be.PutUint32(p[SbOffFirst:], sb.First)
	be.PutUint32(p[SbOffSequence:], sb.Sequence)
	be.PutUint32(p[SbOffStart:], sb.Start)
	be.PutUint32(p[SbOffErrno:], uint32(sb.Errno))
	be.PutUint32(p[SbOffCompat:], uint32(sb.FeatureCompat))
	be.PutUint32(p[SbOffIncompat:], uint32(sb.FeatureIncompat))
	be.PutUint32(p[SbOffRoCompat:], uint32(sb.FeatureRoCompat))
	copy(p[SbOffUUID:], sb.UUID[:])
	be.PutUint32(p[SbOffNrUsers:], sb.NrUsers)
	be.PutUint32(p[SbOffDynSuper:], sb.DynSuper)
	be.PutUint32(p[SbOffMaxTrans:], sb.MaxTransaction)
	be.PutUint32(p[SbOffMaxTransData:], sb.MaxTransData)
	p[SbOffChecksumType] = sb.ChecksumType
	copy(p[SbOffChecksumType+1:SbOffNumFCBlks], sb.Padding2[:])
	be.PutUint32(p[SbOffNumFCBlks:], sb.NumFCBlks)
	be.PutUint32(p[SbOffHead:], sb.Head)
	for i, v := range sb.Padding {
		be.PutUint32(p[SbOffPadding+4*i:], v)
	}
	be.PutUint32(p[SbOffChecksum:], sb.Checksum)
	copy(p[SbOffUsers:SuperblockSize], sb.Users[:])
}

// Unmarshal reads sb from p[:SuperblockSize].
func (sb *Superblock) Unmarshal(p []byte) {
	_ = p[SuperblockSize-1]
	sb.Header.Unmarshal(p)
	sb.BlockSize = be.Uint32(p[SbOffBlockSize:])
	sb.MaxLen = be.Uint32(p[SbOffMaxLen:])
	sb.First = be.Uint32(p[SbOffFirst:])
	sb.Sequence = be.Uint32(p[SbOffSequence:])
	sb.Start = be.Uint32(p[SbOffStart:])
	sb.Errno = int32(be.Uint32(p[SbOffErrno:]))
	sb.FeatureCompat = CompatFeature(be.Uint32(p[SbOffCompat:]))
	sb.FeatureIncompat = IncompatFeature(be.Uint32(p[SbOffIncompat:]))
	sb.FeatureRoCompat = RoCompatFeature(be.Uint32(p[SbOffRoCompat:]))
	copy(sb.UUID[:], p[SbOffUUID:])
	sb.NrUsers = be.Uint32(p[SbOffNrUsers:])
	sb.DynSuper = be.Uint32(p[SbOffDynSuper:])
	sb.MaxTransaction = be.Uint32(p[SbOffMaxTrans:])
	sb.MaxTransData = be.Uint32(p[SbOffMaxTransData:])
	sb.ChecksumType = p[SbOffChecksumType]
	copy(sb.Padding2[:], p[SbOffChecksumType+1:SbOffNumFCBlks])
	sb.NumFCBlks = be.Uint32(p[SbOffNumFCBlks:])
	sb.Head = be.Uint32(p[SbOffHead:])
	for i := range sb.Padding {
		sb.Padding[i] = be.Uint32(p[SbOffPadding+4*i:])
	}
	sb.Checksum = be.Uint32(p[SbOffChecksum:])
	copy(sb.Users[:], p[SbOffUsers:SuperblockSize])
}

// HasCsumV2or3 reports whether the journal carries v2 or v3 checksums
// (jbd2_journal_has_csum_v2or3).
func (sb *Superblock) HasCsumV2or3() bool {
	return sb.FeatureIncompat&(IncompatCsumV2|IncompatCsumV3) != 0
}

var zero4 [4]byte

// SuperblockChecksum computes s_checksum over the marshaled superblock p
// (at least SuperblockSize bytes), treating the checksum field as zero.
func SuperblockChecksum(p []byte) uint32 {
	c := CRC32C(^uint32(0), p[:SbOffChecksum])
	c = CRC32C(c, zero4[:])
	return CRC32C(c, p[SbOffChecksum+4:SuperblockSize])
}

// SetSuperblockChecksum stores SuperblockChecksum(p) into p's s_checksum.
func SetSuperblockChecksum(p []byte) {
	be.PutUint32(p[SbOffChecksum:], SuperblockChecksum(p))
}
