package disk

import "encoding/binary"

var be = binary.BigEndian

// Header is journal_header_t, the first 12 bytes of every journal metadata
// block.
type Header struct {
	Magic     uint32    // h_magic
	BlockType BlockType // h_blocktype
	Sequence  uint32    // h_sequence: the transaction ID
}

// Marshal writes h into p[:HeaderSize].
func (h *Header) Marshal(p []byte) {
	_ = p[HeaderSize-1]
	be.PutUint32(p[0:], h.Magic)
	be.PutUint32(p[4:], uint32(h.BlockType))
	be.PutUint32(p[8:], h.Sequence)
}

// Unmarshal reads h from p[:HeaderSize].
func (h *Header) Unmarshal(p []byte) {
	_ = p[HeaderSize-1]
	h.Magic = be.Uint32(p[0:])
	h.BlockType = BlockType(be.Uint32(p[4:]))
	h.Sequence = be.Uint32(p[8:])
}

// ReadHeader decodes the header at the start of p (len(p) >= HeaderSize).
func ReadHeader(p []byte) Header {
	var h Header
	h.Unmarshal(p)
	return h
}
