// Command rungv runs one isolated episode (an OCI image in gVisor) per
// invocation. It also is gVisor's runsc: the sandbox and gofer processes
// re-execute this binary.
package main

import (
	"os"

	"z.gfire.dev/gvx/cmd/rungv/internal/app"
	"z.gfire.dev/gvx/runtime"
)

func main() { runtime.Main(func() { app.Main(os.Args) }) }
