// Package fuzz holds gvx's cross-package fuzz harnesses: each feeds
// hostile bytes to one parser of untrusted input and then checks what two
// packages (or gvx and a peer) must agree on, beyond "no panic". The
// per-package targets (ext4lite's FuzzOpen, jbd2's FuzzRecover, erofs's
// FuzzReader, overlay's FuzzImportTar, …) stay beside their code; these
// need more than one package:
//
//   - FuzzExt4 mutates real ext4 images (mkfs.ext4 feature variants filled
//     by ext4lite) with structure-aware mutators (ext4lite/ext4test: extent
//     index entries re-pointed at other tree blocks, i_size_high, desc_size,
//     journal tags, checksums kept right) and checks ext4lite's reader, its
//     Check and a round trip through overlay's tar export and import agree:
//     a volume Check calls clean reads without ErrCorrupt, exports, imports
//     into a MemFS as the same tree, and stays clean after ext4lite writes.
//   - FuzzReplay is a differential target: journals with committed
//     transactions (debugfs's jw/jc on mkfs.ext4 variants: checksum v3 on
//     64bit and 32-bit filesystems, no checksum) with their tags mutated,
//     replayed by jbd2.Recover and by e2fsprogs' debugfs -R jr; where both
//     replay, every block must come out the same.
//   - FuzzSparseTar is a differential target: GNU and PAX sparse tars (GNU
//     tar's gnu, posix 0.0, 0.1 and 1.0 formats, and ExportTar's own) as
//     mutated bytes, imported by overlay (which reads sparse maps itself,
//     holes never read) and read by archive/tar (apparent bytes): every
//     file overlay stores must hold exactly what archive/tar reads.
//   - FuzzEROFSGvisor (in fuzz/erofsgvisor, a binary of its own so the
//     others are not instrumented over gVisor) is a differential target:
//     EROFS images from gvx's builder and mkfs.erofs, damaged, read by
//     gvx's reader and by gVisor's pkg/erofs (the Sentry's); where our
//     Check passes and both read an entry, they must agree on it.
//
// Seeds are generated at test time from the real tools (mkfs.ext4,
// debugfs, GNU tar) where they are installed, and from gvx's own writers
// otherwise, so the seed list (and what an input's first byte selects) is
// the same on every machine with the tools. Inputs that once failed are
// kept in testdata/fuzz/<Target>/, named after the bug they reproduce, and
// run by plain go test ./fuzz. scripts/fuzz.sh fuzzes each target for a
// bounded time.
package fuzz
