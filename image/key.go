package image

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"z.gfire.dev/gvx/erofs"
)

// keyVersion names the flattening scheme; bump it when the same layers
// would flatten to a different tree (never for mere byte changes of the
// EROFS writer: old entries stay valid images).
const keyVersion = "gvx-flattened-erofs-v1"

// Key returns the cache key of the flattened image made of layers with
// these diffIDs (uncompressed digests, lowest first) in this profile: the
// hex sha256 of the version, the profile and the diffID chain. Layer
// compression and manifest format do not enter it, so a docker save
// archive and an OCI layout of the same image share one entry.
func Key(diffIDs []v1.Hash, profile erofs.Profile) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\nprofile %s\n", keyVersion, profile)
	for i, d := range diffIDs {
		if d.Algorithm != "sha256" || len(d.Hex) != 64 {
			return "", fmt.Errorf("%w: layer %d has diffID %q; only sha256 is supported", ErrUnsupported, i, d)
		}
		if _, err := hex.DecodeString(d.Hex); err != nil {
			return "", fmt.Errorf("%w: layer %d has diffID %q", ErrCorrupt, i, d)
		}
		fmt.Fprintf(h, "%s\n", d)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
