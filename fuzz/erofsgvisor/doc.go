// Package erofsgvisor holds one differential fuzz harness,
// FuzzEROFSGvisor: damaged EROFS images (seeded from gvx's builder in both
// profiles and from mkfs.erofs) read by gvx's reader and by gVisor's
// pkg/erofs, the Sentry's. Wherever gvx's reader and its Check accept an
// image and both readers read an entry, they must see the same name, type,
// mode, owner, size, link count, symlink target and contents: an image
// `gvx-vol erofs check` passes must mean to the Sentry what it means to us.
//
// It lives apart from package fuzz so that fuzzing the other harnesses is
// not instrumented over gVisor's large dependency tree (see
// erofs/internal/gvisorcheck). Linux only, as gVisor's reader.
package erofsgvisor
