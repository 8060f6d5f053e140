// Command debmirror prints the Debian mirror this host's apt uses, found
// exactly as package image/dindtest finds it for its debootstrap builds
// ($GVX_DEBIAN_MIRROR, else the host's apt sources for bookworm; the same
// mirror serves sid). The bench scripts that build a sid chroot for the
// newest peers (bench/import.sh: mke2fs 1.47.4) call it with go run.
package main

import (
	"fmt"
	"os"

	"z.gfire.dev/gvx/image/dindtest"
)

func main() {
	// dindtest looks up bookworm, the suite this host's sources carry.
	m, err := dindtest.Mirror("bookworm")
	if err != nil {
		fmt.Fprintln(os.Stderr, "debmirror:", err)
		os.Exit(1)
	}
	fmt.Println(m)
}
