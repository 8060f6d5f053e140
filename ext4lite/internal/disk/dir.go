package disk

import "encoding/binary"

// Directory entry constants.
const (
	DirentHeaderSize = 8  // inode, rec_len, name_len, file_type
	DirTailSize      = 12 // struct ext4_dir_entry_tail
	DirTailFileType  = 0xDE
)

// Directory entry file types (ext4_dir_entry_2.file_type).
const (
	FtUnknown = 0
	FtReg     = 1
	FtDir     = 2
	FtChr     = 3
	FtBlk     = 4
	FtFifo    = 5
	FtSock    = 6
	FtSymlink = 7
)

// FileTypeOfMode maps i_mode's type bits to a dirent file type.
func FileTypeOfMode(mode uint16) uint8 {
	switch uint32(mode) & ModeTypeMask {
	case ModeReg:
		return FtReg
	case ModeDir:
		return FtDir
	case ModeChar:
		return FtChr
	case ModeBlock:
		return FtBlk
	case ModeFifo:
		return FtFifo
	case ModeSocket:
		return FtSock
	case ModeSymlink:
		return FtSymlink
	}
	return FtUnknown
}

// Dirent is a decoded struct ext4_dir_entry_2.
type Dirent struct {
	Inode    uint32
	RecLen   uint16
	NameLen  uint8
	FileType uint8
}

// DecodeDirent parses the 8-byte header at b.
func DecodeDirent(b []byte) Dirent {
	return Dirent{
		Inode:    binary.LittleEndian.Uint32(b[0:]),
		RecLen:   binary.LittleEndian.Uint16(b[4:]),
		NameLen:  b[6],
		FileType: b[7],
	}
}

// DirentRecLen is the minimal rec_len of an entry with a name of n bytes.
func DirentRecLen(n int) int { return (DirentHeaderSize + n + 3) &^ 3 }

// PutDirent writes an entry with the given rec_len at b.
func PutDirent(b []byte, ino uint32, recLen int, ft uint8, name string) {
	binary.LittleEndian.PutUint32(b[0:], ino)
	binary.LittleEndian.PutUint16(b[4:], uint16(recLen))
	b[6] = uint8(len(name))
	b[7] = ft
	n := copy(b[8:], name)
	clear(b[8+n : DirentRecLen(len(name))])
}

// DecodeRecLen decodes rec_len for block sizes up to 256 KiB (a value of 0
// or 65535 means the whole 64 KiB block).
func DecodeRecLen(v uint16, blockSize int) int {
	if blockSize < 65536 {
		return int(v)
	}
	if v == 65535 || v == 0 {
		return blockSize
	}
	return int(v&65532) | int(v&3)<<16
}

// EncodeRecLen is the inverse of DecodeRecLen.
func EncodeRecLen(n, blockSize int) uint16 {
	if blockSize < 65536 {
		return uint16(n)
	}
	if n == blockSize {
		return 65535
	}
	return uint16(n&65532) | uint16((n>>16)&3)
}

// PutDirTail writes the 12-byte checksum tail at the end of a leaf block
// and fills in its checksum.
func PutDirTail(block []byte, inodeSeed uint32) {
	t := block[len(block)-DirTailSize:]
	binary.LittleEndian.PutUint32(t[0:], 0)
	binary.LittleEndian.PutUint16(t[4:], DirTailSize)
	t[6] = 0
	t[7] = DirTailFileType
	binary.LittleEndian.PutUint32(t[8:], DirBlockChecksum(inodeSeed, block))
}

// HasDirTail reports whether block ends in a checksum tail.
func HasDirTail(block []byte) bool {
	t := block[len(block)-DirTailSize:]
	return binary.LittleEndian.Uint32(t[0:]) == 0 &&
		binary.LittleEndian.Uint16(t[4:]) == DirTailSize &&
		t[6] == 0 && t[7] == DirTailFileType
}

// DirBlockChecksum is crc32c(inode seed) over a leaf block without its tail.
func DirBlockChecksum(inodeSeed uint32, block []byte) uint32 {
	return CRC32c(inodeSeed, block[:len(block)-DirTailSize])
}

// StoredDirTailChecksum returns the checksum a tail holds.
func StoredDirTailChecksum(block []byte) uint32 {
	return binary.LittleEndian.Uint32(block[len(block)-4:])
}
