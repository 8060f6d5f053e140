package dindtest

import "errors"

// Errors that say the image cannot be built on this machine (tests skip on
// them, see IsUnavailable) rather than that building it went wrong.
var (
	// ErrNotRoot: debootstrap and chroot need root.
	ErrNotRoot = errors.New("dindtest: building the dind image needs root")
	// ErrNoDebootstrap: the debootstrap tool is missing.
	ErrNoDebootstrap = errors.New("dindtest: debootstrap is not installed (apt-get install debootstrap)")
	// ErrNoNetwork: debootstrap or apt could not reach the Debian mirror.
	ErrNoNetwork = errors.New("dindtest: the Debian mirror is unreachable")
	// ErrNoMirror: no Debian mirror is configured in the host's apt sources.
	ErrNoMirror = errors.New("dindtest: no Debian mirror in /etc/apt/sources.list{,.d}")
	// ErrUnsupported: the host OS cannot build the image (not Linux).
	ErrUnsupported = errors.New("dindtest: building the dind image needs Linux")
)

// IsUnavailable reports whether err means that this machine cannot build
// the image (a reason to skip a test), not that the build is broken.
func IsUnavailable(err error) bool {
	for _, e := range []error{ErrNotRoot, ErrNoDebootstrap, ErrNoNetwork, ErrNoMirror, ErrUnsupported} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
