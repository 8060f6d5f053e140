package reflink_test

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"z.gfire.dev/gvx/reflink"
)

// Reset an episode's volume from the golden one, telling the user what to
// do when the filesystem cannot clone.
func ExampleClone() {
	dir, _ := os.MkdirTemp("", "gvx-example-")
	defer os.RemoveAll(dir)
	golden := filepath.Join(dir, "golden-docker.ext4")
	os.WriteFile(golden, []byte("an ext4 image"), 0o644)

	err := reflink.Clone(golden, filepath.Join(dir, "ep-0042.ext4"))
	var nse *reflink.NotSupportedError
	switch {
	case errors.As(err, &nse):
		fmt.Println("cannot clone here:", nse.Reason())
	case err != nil:
		log.Fatal(err)
	}
}

// Prepare a scratch volume anywhere: a clone where the filesystem can, a
// sparse copy elsewhere; Never forces the copy.
func ExampleCloneFile() {
	dir, _ := os.MkdirTemp("", "gvx-example-")
	defer os.RemoveAll(dir)
	golden := filepath.Join(dir, "golden-docker.ext4")
	f, _ := os.Create(golden)
	f.Truncate(1 << 30) // 1 GiB, all hole
	f.WriteAt([]byte("superblock"), 1024)
	f.Close()

	res, err := reflink.CloneFile(golden, filepath.Join(dir, "ep-0000.ext4"), reflink.Options{Mode: reflink.Never})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Method, res.Size)
	// Output: copy 1073741824
}
