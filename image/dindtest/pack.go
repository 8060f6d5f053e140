package dindtest

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"z.gfire.dev/gvx/internal/durable"
)

// skipContents are directories of the rootfs packed empty: the runtime
// mounts its own /dev, /proc and /sys.
var skipContents = map[string]bool{"dev": true, "proc": true, "sys": true}

// packRootfs writes root as an uncompressed tar into blobDir, named by its
// sha256 as an OCI blob, and returns the layer. Ownership, modes, times,
// symlinks and hard links are kept; xattrs are not (the runtime's EROFS
// profile holds none).
func packRootfs(root, blobDir string) (v1.Layer, error) {
	f, err := durable.CreateTemp(filepath.Join(blobDir, "layer")) // named once hashed
	if err != nil {
		return nil, err
	}
	defer f.Discard()
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(f, h)}
	tw := tar.NewWriter(cw)
	links := map[inodeKey]string{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		target := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if target, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, target)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		hdr.Name = rel
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uname, hdr.Gname = "", ""
		hdr.Format = tar.FormatPAX
		hdr.AccessTime, hdr.ChangeTime = fi.ModTime(), fi.ModTime()
		if fi.Mode().IsRegular() {
			if k, ok := inodeOf(fi); ok {
				if first, seen := links[k]; seen {
					hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
				} else {
					links[k] = rel
				}
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if hdr.Typeflag == tar.TypeReg && hdr.Size > 0 {
			src, err := os.Open(p)
			if err != nil {
				return err
			}
			n, err := io.Copy(tw, src)
			src.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			if n != hdr.Size {
				return fmt.Errorf("%s: changed while packing", rel)
			}
		}
		if fi.IsDir() && skipContents[rel] {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dindtest: pack %s: %w", root, err)
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	hex := hex.EncodeToString(h.Sum(nil))
	final := filepath.Join(blobDir, hex)
	if err := f.Publish(final, 0o644, durable.Options{}); err != nil { // 0644: rootless runs read it too
		return nil, err
	}
	return &fileLayer{path: final, hash: v1.Hash{Algorithm: "sha256", Hex: hex}, size: cw.n}, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

type inodeKey struct{ dev, ino uint64 }

// fileLayer is an uncompressed layer in a file: its digest and diff ID are
// the same.
type fileLayer struct {
	path string
	hash v1.Hash
	size int64
}

func (l *fileLayer) Digest() (v1.Hash, error)           { return l.hash, nil }
func (l *fileLayer) DiffID() (v1.Hash, error)           { return l.hash, nil }
func (l *fileLayer) Compressed() (io.ReadCloser, error) { return os.Open(l.path) }
func (l *fileLayer) Uncompressed() (io.ReadCloser, error) {
	return os.Open(l.path)
}
func (l *fileLayer) Size() (int64, error)                { return l.size, nil }
func (l *fileLayer) MediaType() (types.MediaType, error) { return types.OCIUncompressedLayer, nil }
