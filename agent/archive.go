package agent

import (
	"archive/tar"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// getArchive answers a tar of the path: its entries are named base(P) and
// base(P)/… (as docker cp does), symlinks are stored as symlinks.
func (a *Agent) getArchive(w http.ResponseWriter, r *http.Request) {
	p, err := guestPath(r)
	if err != nil {
		writeError(w, err)
		return
	}
	p = filepath.Clean(p)
	if _, err := os.Lstat(p); err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.WriteHeader(http.StatusOK)
	tw := tar.NewWriter(w)
	base := filepath.Base(p)
	if p == "/" {
		base = "."
	}
	// Errors after the header are the truncated tar the client sees.
	_ = filepath.WalkDir(p, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: left out
		}
		rel, _ := filepath.Rel(p, name)
		return addTar(tw, name, path.Join(base, filepath.ToSlash(rel)))
	})
	_ = tw.Close()
}

func addTar(tw *tar.Writer, name, entry string) error {
	fi, err := os.Lstat(name)
	if err != nil {
		return nil
	}
	link := ""
	if fi.Mode()&fs.ModeSymlink != 0 {
		if link, err = os.Readlink(name); err != nil {
			return nil
		}
	}
	h, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return nil // a socket, say: not archivable
	}
	h.Name, h.Uname, h.Gname, h.Format = entry, "", "", tar.FormatPAX
	if fi.IsDir() {
		h.Name += "/"
	}
	if !fi.Mode().IsRegular() {
		return tw.WriteHeader(h)
	}
	f, err := os.Open(name)
	if err != nil {
		return nil
	}
	defer f.Close()
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err = io.CopyN(tw, f, h.Size)
	return err
}

// putArchive unpacks a tar body into the directory ?path= (made 0755):
// directories, regular files, symlinks and hard links (within the tree);
// other entry types are skipped. Names are taken relative to the
// directory, ".." cannot climb out of it.
func (a *Agent) putArchive(w http.ResponseWriter, r *http.Request) {
	dst, err := guestPath(r)
	if err != nil {
		writeError(w, err)
		return
	}
	res, err := extract(filepath.Clean(dst), r.Body)
	if err != nil {
		drain(r.Body)
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func extract(dst string, r io.Reader) (ArchiveResult, error) {
	var res ArchiveResult
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return res, err
	}
	tr := tar.NewReader(r)
	type dirTime struct {
		path string
		t    time.Time
	}
	var dirs []dirTime
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return res, errorf(http.StatusBadRequest, "archive: %v", err)
		}
		if res.Entries++; res.Entries > MaxArchiveEntries {
			return res, errorf(http.StatusRequestEntityTooLarge, "archive: more than %d entries", MaxArchiveEntries)
		}
		target := within(dst, h.Name)
		if target == dst && h.Typeflag != tar.TypeDir {
			continue
		}
		mode := unixToFileMode(uint32(h.Mode) & 0o7777) // a tar header's mode is chmod's bits
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return res, err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return res, err
			}
			_ = os.Chmod(target, mode)
			dirs = append(dirs, dirTime{target, h.ModTime})
		case tar.TypeReg:
			if h.Size > MaxFileBytes {
				return res, errorf(http.StatusRequestEntityTooLarge, "archive: %s is %d bytes, over %d", h.Name, h.Size, int64(MaxFileBytes))
			}
			_ = os.Remove(target) // a symlink there is replaced, not followed
			n, err := writeFileFrom(target, mode, tr)
			res.Bytes += n
			if err != nil {
				return res, err
			}
		case tar.TypeSymlink:
			_ = os.Remove(target)
			if err := os.Symlink(h.Linkname, target); err != nil {
				return res, err
			}
		case tar.TypeLink:
			_ = os.Remove(target)
			if err := os.Link(within(dst, h.Linkname), target); err != nil {
				return res, err
			}
		default:
			continue
		}
		_ = os.Lchown(target, h.Uid, h.Gid)
		if h.Typeflag == tar.TypeReg && mode&(os.ModeSetuid|os.ModeSetgid) != 0 {
			_ = os.Chmod(target, mode) // chown(2) cleared setuid and setgid
		}
		if h.Typeflag != tar.TypeSymlink && h.Typeflag != tar.TypeDir {
			_ = os.Chtimes(target, h.ModTime, h.ModTime)
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- { // after their contents
		_ = os.Chtimes(dirs[i].path, dirs[i].t, dirs[i].t)
	}
	return res, nil
}

// within is name (a tar entry) as a path under dst, never above it.
func within(dst, name string) string {
	return filepath.Join(dst, filepath.FromSlash(path.Clean("/"+strings.TrimPrefix(name, "./"))))
}
