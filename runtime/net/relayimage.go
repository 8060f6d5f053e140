package episodenet

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"
	"time"

	"z.gfire.dev/gvx/erofs"
	"z.gfire.dev/gvx/erofs/cache"
	"z.gfire.dev/gvx/internal/filehash"
	"z.gfire.dev/gvx/sink"
)

// The relay a guest with published ports runs as its init (RelayInit)
// is this binary. It reaches the guest as a copy in a read-only EROFS
// image of its own (mounted at /.gvx, opened by the Sentry itself, like
// the rootfs), not as a view of the host file: the guest sees no file of
// the host, and the episode needs no gofer for it. The image is built once
// per binary into the image cache, named by the binary's Go build ID (a
// hash of its content Go records at link time; the file's sha256 where it
// has none).

// relayImageVersion is part of the relay image's name: bump it when the
// image's layout changes.
const relayImageVersion = "gvx-relay 1"

// RelayImage returns the path of this binary's relay image in c, building
// it if missing.
func RelayImage(c *cache.Cache) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	id, err := binaryID(self)
	if err != nil {
		return "", fmt.Errorf("relay image: %w", err)
	}
	sum := sha256.Sum256([]byte(relayImageVersion + "\x00" + id))
	pin, err := c.Pin()
	if err != nil {
		return "", err
	}
	defer pin.Close()
	path, _, err := pin.Ensure(hex.EncodeToString(sum[:])+".erofs", func(f *os.File) error {
		return writeRelayImage(f, self, c.TempDir())
	})
	return path, err
}

// writeRelayImage writes an EROFS image holding bin as /rungv (0555).
func writeRelayImage(f *os.File, bin, tmp string) error {
	src, err := os.Open(bin)
	if err != nil {
		return err
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return err
	}
	b := erofs.NewBuilder(erofs.Options{Profile: erofs.ProfileRuntime, TempDir: tmp})
	defer b.Close()
	epoch := time.Unix(0, 0)
	if err := b.WriteFile(&sink.Header{Path: "rungv", Mode: sink.TypeReg | 0o555, Size: st.Size(), Mtime: epoch, Atime: epoch, Ctime: epoch}, src); err != nil {
		return err
	}
	_, err = b.WriteTo(f)
	return err
}

// binaryID is bin's Go build ID (its ELF note), or the sha256 of its
// content.
func binaryID(bin string) (string, error) {
	if ef, err := elf.Open(bin); err == nil {
		defer ef.Close()
		if s := ef.Section(".note.go.buildid"); s != nil {
			if d, err := s.Data(); err == nil && len(d) >= 16 {
				namesz, descsz := ef.ByteOrder.Uint32(d), ef.ByteOrder.Uint32(d[4:])
				off := 12 + (namesz+3)&^3
				if namesz == 4 && string(d[12:15]) == "Go\x00" && uint64(off)+uint64(descsz) <= uint64(len(d)) && descsz > 0 {
					return "go:" + string(d[off:off+descsz]), nil
				}
			}
		}
	}
	sum, err := filehash.SHA256(bin)
	if err != nil {
		return "", err
	}
	return "sha256:" + sum, nil
}
