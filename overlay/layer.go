package overlay

import (
	"fmt"
	"io"

	"z.gfire.dev/gvx/sink"
)

// Extended attributes overlayfs reads to find opaque directories.
const (
	OpaqueXattr     = "trusted.overlay.opaque"
	UserOpaqueXattr = "user.overlay.opaque" // for mounts with -o userxattr
)

// LayerOptions tunes ApplyLayer and WriteLayerOverlayFS.
type LayerOptions struct {
	// MaxFileSize refuses regular files larger than this with ErrTooLarge;
	// 0 means no limit.
	MaxFileSize int64
	// UserXattr marks opaque directories with user.overlay.opaque instead
	// of trusted.overlay.opaque (WriteLayerOverlayFS only), for overlayfs
	// mounted with -o userxattr by an unprivileged user.
	UserXattr bool
	// MaxPathDepth and MaxXattrSize bound an entry's path depth and each
	// xattr value; 0 means DefaultMaxPathDepth and DefaultMaxXattrSize.
	MaxPathDepth int
	MaxXattrSize int
}

func (o LayerOptions) limits() limits {
	return newLimits(o.MaxFileSize, o.MaxPathDepth, o.MaxXattrSize)
}

// ApplyLayer applies the OCI layer read from r (uncompressed, gzip or
// zstd) onto the tree already in dst, which holds the layers below it.
//
// ".wh.NAME" removes NAME of lower layers (an entry of this layer with that
// name is kept, whatever the order); ".wh..wh..opq" hides every lower entry
// of its directory while this layer's entries there stay, whatever their
// order in the archive; an entry replaces a lower one of another type (a
// directory over a directory merges); directory metadata comes from the
// last layer that has the directory, and directories this layer only adds
// to keep theirs; hard links may point into this layer or lower ones.
// Names are handled as in ImportTar: nothing lands outside dst.
func ApplyLayer(dst sink.Sink, r io.Reader, opts LayerOptions) error {
	w, err := newWalker(dst, modeLayer, ".", opts.limits())
	if err != nil {
		return err
	}
	return w.run(r)
}

// WriteLayerOverlayFS writes the one OCI layer read from r into dst (an
// empty tree) in overlayfs's on-disk form, as Docker's overlay2 driver
// does: a whiteout becomes a character device 0:0 with the whiteout entry's
// owner, an opaque directory gets trusted.overlay.opaque=y (or
// user.overlay.opaque=y with opts.UserXattr). Stacking such trees as
// lowerdir=Ln:…:L1 shows what Flatten builds.
func WriteLayerOverlayFS(dst sink.Sink, r io.Reader, opts LayerOptions) error {
	w, err := newWalker(dst, modeOverlayFS, ".", opts.limits())
	if err != nil {
		return err
	}
	w.opaqueKey = OpaqueXattr
	if opts.UserXattr {
		w.opaqueKey = UserOpaqueXattr
	}
	return w.run(r)
}

// Flatten applies layers, lowest first, into dst with ApplyLayer and
// default options.
func Flatten(dst sink.Sink, layers ...io.Reader) error {
	for i, l := range layers {
		if err := ApplyLayer(dst, l, LayerOptions{}); err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
	}
	return nil
}
