package jbd2

import (
	"errors"
	"fmt"
)

// Errors returned by this package. Every error from parsing journal bytes
// wraps ErrCorrupt or ErrUnsupported.
var (
	// ErrCorrupt reports journal bytes that break the format.
	ErrCorrupt = errors.New("jbd2: journal is corrupt")
	// ErrUnsupported reports a valid journal using something this package
	// does not implement (an unknown incompat feature, fast commits, ...).
	ErrUnsupported = errors.New("jbd2: unsupported journal")
	// ErrNoSpace reports a transaction larger than the whole journal, or a
	// journal too full to take it before a checkpoint.
	ErrNoSpace = errors.New("jbd2: no space left in journal")
	// ErrNeedsRecovery reports an operation refused on a journal that holds
	// committed transactions not yet replayed (run Recover first).
	ErrNeedsRecovery = errors.New("jbd2: journal needs recovery")
)

// FormatError describes corrupt journal bytes: which journal block, and what.
// It unwraps to ErrCorrupt.
type FormatError struct {
	Block uint32 // journal block number
	Msg   string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("jbd2: corrupt journal block %d: %s", e.Block, e.Msg)
}

// Unwrap returns ErrCorrupt.
func (e *FormatError) Unwrap() error { return ErrCorrupt }

func corruptf(block uint32, format string, args ...any) error {
	return &FormatError{Block: block, Msg: fmt.Sprintf(format, args...)}
}

func unsupportedf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUnsupported}, args...)...)
}
