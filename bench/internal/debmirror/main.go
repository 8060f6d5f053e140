// Command debmirror prints the Debian mirror this host's apt uses, found
// exactly as package image/dindtest finds it (dindtest.Mirror: the
// $GVX_DEBIAN_MIRROR override, else /etc/apt/sources.list{,.d}), for the
// bench scripts that debootstrap a peer's chroot (bench/erofs.sh: a sid
// chroot with erofs-utils 1.9).
//
//	go run ./bench/internal/debmirror
package main

import (
	"fmt"
	"os"

	"z.gfire.dev/gvx/image/dindtest"
)

func main() {
	// A mirror that serves the host's bookworm serves sid too.
	m, err := dindtest.Mirror(dindtest.Suite)
	if err != nil {
		fmt.Fprintln(os.Stderr, "debmirror:", err)
		os.Exit(1)
	}
	fmt.Println(m)
}
