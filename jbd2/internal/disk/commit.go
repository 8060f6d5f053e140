package disk

// Commit is struct commit_header, the start of a commit block.
type Commit struct {
	Header               // h_magic, h_blocktype = BlockCommit, h_sequence
	ChksumType uint8     // h_chksum_type (v1 checksums only; 0 with v2/v3)
	ChksumSize uint8     // h_chksum_size
	Padding    [2]uint8  // h_padding
	Chksum     [8]uint32 // h_chksum; v2/v3 store the block checksum in [0]
	CommitSec  uint64    // h_commit_sec
	CommitNsec uint32    // h_commit_nsec
}

// Byte offsets within the commit block.
const (
	CommitOffChksum = 0x10
	CommitOffSec    = 0x30
	CommitOffNsec   = 0x38
)

// Marshal writes c into p[:CommitSize].
func (c *Commit) Marshal(p []byte) {
	_ = p[CommitSize-1]
	c.Header.Marshal(p)
	p[0x0C] = c.ChksumType
	p[0x0D] = c.ChksumSize
	p[0x0E], p[0x0F] = c.Padding[0], c.Padding[1]
	for i, v := range c.Chksum {
		be.PutUint32(p[CommitOffChksum+4*i:], v)
	}
	be.PutUint64(p[CommitOffSec:], c.CommitSec)
	be.PutUint32(p[CommitOffNsec:], c.CommitNsec)
}

// Unmarshal reads c from p[:CommitSize].
func (c *Commit) Unmarshal(p []byte) {
	_ = p[CommitSize-1]
	c.Header.Unmarshal(p)
	c.ChksumType = p[0x0C]
	c.ChksumSize = p[0x0D]
	c.Padding = [2]uint8{p[0x0E], p[0x0F]}
	for i := range c.Chksum {
		c.Chksum[i] = be.Uint32(p[CommitOffChksum+4*i:])
	}
	c.CommitSec = be.Uint64(p[CommitOffSec:])
	c.CommitNsec = be.Uint32(p[CommitOffNsec:])
}

// CommitChecksum is the v2/v3 checksum of a whole commit block:
// crc32c(seed, block with h_chksum[0] zeroed).
func CommitChecksum(seed uint32, block []byte) uint32 {
	c := CRC32C(seed, block[:CommitOffChksum])
	c = CRC32C(c, zero4[:])
	return CRC32C(c, block[CommitOffChksum+4:])
}

// SetCommitChecksum stores CommitChecksum into the commit block's h_chksum[0].
func SetCommitChecksum(seed uint32, block []byte) {
	be.PutUint32(block[CommitOffChksum:], CommitChecksum(seed, block))
}

// CommitChecksumOK reports whether a commit block's v2/v3 checksum holds.
func CommitChecksumOK(seed uint32, block []byte) bool {
	return be.Uint32(block[CommitOffChksum:]) == CommitChecksum(seed, block)
}

// ReadCommitTime returns h_commit_sec of a commit block.
func ReadCommitTime(block []byte) uint64 { return be.Uint64(block[CommitOffSec:]) }
