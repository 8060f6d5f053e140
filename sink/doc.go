// Package sink declares the filesystem sink: the one interface through which
// gvx's layer walkers (tar import, OCI layer application in package overlay)
// write a tree into any target — an ext4lite volume, the EROFS builder, or a
// plain host directory.
//
// The contract every implementation keeps:
//
//   - Paths are slash-separated, relative to the sink's root, already cleaned
//     (no "", ".", ".." element, no leading "/"). The root itself is ".".
//   - No operation follows a symbolic link in any path component, final or
//     intermediate: an intermediate symlink is an error wrapping ErrSymlinkInPath.
//     This is what keeps hostile layers from writing outside the target.
//   - The parent directory of a new entry must exist (walkers create parents
//     first, as tar archives do).
//   - Creating an entry where a non-directory already exists replaces it; where
//     a directory exists, Mkdir updates its metadata and keeps its children and
//     every other create fails (walkers call RemoveAll first, as OCI's
//     "a later entry replaces an earlier one" requires).
//   - Metadata is applied exactly: mode incl. setuid/setgid/sticky, uid/gid,
//     nanosecond times, xattrs (full names such as "trusted.overlay.opaque").
//     A sink that cannot store something returns an error wrapping
//     ErrUnsupported rather than dropping it silently, unless it was built
//     with an option that says otherwise.
//
// Example, creating a whiteout (a char device 0:0) in any sink:
//
//	err := s.Mknod(&sink.Header{Path: "etc/gone", Mode: sink.TypeChar})
package sink
