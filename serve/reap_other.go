//go:build !linux

package serve

// killIfSame kills nothing: without /proc no process can be matched to
// its record (procStart is 0), so none is.
func killIfSame(rec *record, rungv string, logf func(string, ...any)) error { return nil }

// noteExe records nothing without /proc.
func noteExe(rec *record) {}
