package runtime

import (
	"fmt"

	"z.gfire.dev/gvx/runtime/internal/passwd"
	"z.gfire.dev/gvx/sink"
)

type guestUser = passwd.User

// resolveUser resolves --user against the image (see package passwd).
func resolveUser(src sink.Source, spec string) (guestUser, error) {
	u, err := passwd.Resolve(src, spec)
	if err != nil {
		return u, fmt.Errorf("%w: %w", ErrBadOption, err)
	}
	return u, nil
}
