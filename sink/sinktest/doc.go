// Package sinktest is the test kit for sink implementations and the walkers
// that write into them.
//
// It offers:
//
//   - MemFS, an in-memory sink.Sink and sink.Source that keeps the contract of
//     package sink exactly (the reference every other sink is compared with).
//     All-zero 4 KiB blocks are stored as holes, so sparse files of many GiB
//     cost nothing; MaxBytes caps the data held, for fuzzing.
//   - Compare, which walks two sink.Source trees and reports every difference
//     (type, mode, owner, size, content, symlink target, device numbers,
//     hard-link groups, xattrs, times to the nanosecond) as a *DiffError, with
//     options for what a target cannot keep (ctime, dir sizes, …).
//   - RandomTree and EdgeTree, which populate any sink.Sink with a reproducible
//     random tree or a fixed tree of named edge cases.
//   - Conformance, the shared test suite every sink implementation runs.
//
// Nothing here is meant for production paths; it trusts its inputs.
//
// Example, in a sink implementation's tests:
//
//	func TestConformance(t *testing.T) {
//		sinktest.Conformance(t, func() (sink.Sink, sink.Source) {
//			d := hostdir.New(t.TempDir())
//			return d, d
//		})
//	}
//
// and in a walker's tests:
//
//	src, dst := sinktest.NewMemFS(), sinktest.NewMemFS()
//	sinktest.RandomTree(src, rand.New(rand.NewPCG(1, 2)), sinktest.TreeOptions{})
//	// … export src as tar, import it into dst …
//	if err := sinktest.Compare(src, dst, sinktest.CompareOptions{}); err != nil {
//		t.Fatal(err)
//	}
package sinktest
