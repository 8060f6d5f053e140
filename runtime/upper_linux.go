package runtime

import (
	"archive/tar"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"time"
)

// The rootfs's writable layer can start with files of rungv's: the Sentry
// unpacks a small tar (annRootfsUpperTar) into the memory overlay before
// the guest runs. They are the guest's own files then (it may change
// them, as with docker's /etc/resolv.conf), and no bind mount, hence no
// gofer (~30 ms per episode), is needed for them.

// upperFile is one regular file of the rootfs's writable layer.
type upperFile struct {
	path string // absolute guest path
	mode int64
	body string
}

// annRootfsUpperTar names a tar file the Sentry unpacks into the rootfs's
// writable (memory) layer before the guest starts.
const annRootfsUpperTar = "dev.gvisor.tar.rootfs.upper"

// allowRootfsTar is runsc's flag that lets the bundle name the tar.
const allowRootfsTar = "--allow-rootfs-tar-annotation"

// writeUpperTar writes files into the bundle's rootfs-upper tar (parent
// directories 0755 root:root, which the guest then sees as theirs) and
// returns its path. No files: nothing is written, and the path is "".
func writeUpperTar(bundle string, files []upperFile) (string, error) {
	if len(files) == 0 {
		return "", nil
	}
	p := filepath.Join(bundle, "rootfs-upper.tar")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", err
	}
	tw := tar.NewWriter(f)
	now := time.Now()
	dirs := map[string]bool{".": true}
	var names []string
	for _, uf := range files {
		for d := path.Dir(uf.path); d != "/"; d = path.Dir(d) {
			dirs["."+d] = true
		}
	}
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names) // parents first
	for _, d := range names {
		if err = tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: now}); err != nil {
			break
		}
	}
	for _, uf := range files {
		if err != nil {
			break
		}
		if err = tw.WriteHeader(&tar.Header{Name: "." + uf.path, Typeflag: tar.TypeReg, Mode: uf.mode, Size: int64(len(uf.body)), ModTime: now}); err == nil {
			_, err = tw.Write([]byte(uf.body))
		}
	}
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("the rootfs's first files: %s: %w", p, err)
	}
	return p, nil
}
