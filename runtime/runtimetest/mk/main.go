// Command mk writes the busybox test image as an OCI layout into the
// directory named by its argument (used by bench/start.sh).
package main

import (
	"fmt"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"z.gfire.dev/gvx/runtime/runtimetest"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: mk DIR")
		os.Exit(2)
	}
	err := runtimetest.Busybox(os.Args[1], v1.Config{Cmd: []string{"sh"}, Env: []string{"PATH=/bin"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
