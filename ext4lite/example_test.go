package ext4lite_test

import (
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/sink"
)

// Example makes a volume in one sparse file, writes a small tree through
// the sink API, closes it, then reopens it read-only, reads the tree back
// and checks it. Linux mounts the same file (mount -o loop vol.ext4 /mnt)
// and e2fsck -fn passes on it.
func Example() {
	dir, err := os.MkdirTemp("", "ext4lite-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "vol.ext4")

	// A 256 MiB volume; the file takes only what is written.
	v, err := ext4lite.Create(path, 256<<20, &ext4lite.CreateOptions{Label: "example"})
	if err != nil {
		log.Fatal(err)
	}
	mtime := time.Date(2024, 5, 1, 12, 0, 0, 123456789, time.UTC) // nanoseconds are kept
	steps := []error{
		v.Mkdir(&sink.Header{Path: "etc", Mode: sink.TypeDir | 0o755, Mtime: mtime}),
		v.WriteFile(&sink.Header{Path: "etc/hostname", Mode: sink.TypeReg | 0o644, Size: 7, Mtime: mtime,
			Xattrs: map[string][]byte{"user.origin": []byte("example")}}, strings.NewReader("gvx-01\n")),
		v.Symlink(&sink.Header{Path: "hostname", Mode: sink.TypeSymlink | 0o777, Linkname: "etc/hostname"}),
		v.Mknod(&sink.Header{Path: "etc/gone", Mode: sink.TypeChar}), // an overlayfs whiteout
	}
	for _, err := range steps {
		if err != nil {
			log.Fatal(err)
		}
	}
	if err := v.Close(); err != nil { // writes the metadata and marks the volume clean
		log.Fatal(err)
	}

	r, err := ext4lite.Open(path, &ext4lite.Options{ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	names, _ := r.ReadDir("etc")
	fmt.Println("etc:", names)
	h, _ := r.Lstat("etc/hostname")
	fmt.Printf("etc/hostname: mode %o, size %d, mtime %s, user.origin=%s\n",
		h.Mode, h.Size, h.Mtime.UTC().Format(time.RFC3339Nano), h.Xattrs["user.origin"])
	f, _ := r.Open("etc/hostname")
	data, _ := io.ReadAll(f)
	f.Close()
	fmt.Printf("contents: %q\n", data)
	target, _ := r.Readlink("hostname")
	fmt.Println("hostname ->", target)
	rep, err := r.Check(nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("clean:", rep.Clean())
	// Output:
	// etc: [gone hostname]
	// etc/hostname: mode 100644, size 7, mtime 2024-05-01T12:00:00.123456789Z, user.origin=example
	// contents: "gvx-01\n"
	// hostname -> etc/hostname
	// clean: true
}
