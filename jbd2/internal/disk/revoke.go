package disk

// RevokeHeader is jbd2_journal_revoke_header_t, the start of a revoke block.
// Records (8 bytes with the 64bit feature, else 4) follow up to byte Count.
type RevokeHeader struct {
	Header        // h_blocktype = BlockRevoke
	Count  uint32 // r_count: bytes used in the block, this header included
}

// Marshal writes r into p[:RevokeHdrSize].
func (r *RevokeHeader) Marshal(p []byte) {
	_ = p[RevokeHdrSize-1]
	r.Header.Marshal(p)
	be.PutUint32(p[HeaderSize:], r.Count)
}

// Unmarshal reads r from p[:RevokeHdrSize].
func (r *RevokeHeader) Unmarshal(p []byte) {
	_ = p[RevokeHdrSize-1]
	r.Header.Unmarshal(p)
	r.Count = be.Uint32(p[HeaderSize:])
}

// RevokeRecordSize is the size of one revoke record.
func RevokeRecordSize(f IncompatFeature) int {
	if f&Incompat64Bit != 0 {
		return 8
	}
	return 4
}

// PutRevokeRecord encodes fs block b at the start of p.
func PutRevokeRecord(p []byte, f IncompatFeature, b uint64) {
	if f&Incompat64Bit != 0 {
		be.PutUint64(p, b)
	} else {
		be.PutUint32(p, uint32(b))
	}
}

// GetRevokeRecord decodes the record at the start of p.
func GetRevokeRecord(p []byte, f IncompatFeature) uint64 {
	if f&Incompat64Bit != 0 {
		return be.Uint64(p)
	}
	return uint64(be.Uint32(p))
}

// Tail is struct jbd2_journal_block_tail, the last 4 bytes of descriptor
// and revoke blocks in checksum v2/v3 journals.
type Tail struct {
	Checksum uint32 // t_checksum: crc32c(seed, block with this field 0)
}

// Marshal writes t into p[:TailSize].
func (t *Tail) Marshal(p []byte) { be.PutUint32(p, t.Checksum) }

// Unmarshal reads t from p[:TailSize].
func (t *Tail) Unmarshal(p []byte) { t.Checksum = be.Uint32(p) }

// TailChecksum is the checksum of a descriptor or revoke block.
func TailChecksum(seed uint32, block []byte) uint32 {
	n := len(block) - TailSize
	return CRC32C(CRC32C(seed, block[:n]), zero4[:])
}

// SetTailChecksum stores TailChecksum in the block's tail.
func SetTailChecksum(seed uint32, block []byte) {
	be.PutUint32(block[len(block)-TailSize:], TailChecksum(seed, block))
}

// TailChecksumOK reports whether the block's tail checksum holds.
func TailChecksumOK(seed uint32, block []byte) bool {
	return be.Uint32(block[len(block)-TailSize:]) == TailChecksum(seed, block)
}
