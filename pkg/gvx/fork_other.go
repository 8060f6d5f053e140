//go:build !unix

package gvx

import (
	"errors"
	"os"
)

func controlPair() (ours, theirs *os.File, err error) {
	return nil, nil, errors.New("checkpoints need a unix host (rungv runs on Linux)")
}
