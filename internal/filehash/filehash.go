// Package filehash is the one helper that hashes a file's contents, for
// the caches that check what they hand out against a recorded digest (the
// test image cache, the gVisor patch cache, the bench's image cache).
package filehash

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
)

// SHA256 returns the lower-case hex sha256 of the file at p.
func SHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
