// Command rungv runs one isolated episode (an OCI image in gVisor) per
// invocation. It also is gVisor's runsc: the sandbox and gofer processes
// re-execute this binary.
//
// It is four programs in one: rungv's CLI (package app), the runtime's
// own processes and runsc (runtime.Main), and, inside an episode of
// rungv serve, the in-guest agent (package agent), which the episode's
// relay starts as /.gvx/rungv _gvx-agent.
package main

import (
	"os"

	"z.gfire.dev/gvx/agent"
	"z.gfire.dev/gvx/cmd/rungv/internal/app"
	"z.gfire.dev/gvx/runtime"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == agent.Verb { // inside the guest, under the relay
		os.Exit(agent.Main(os.Args[2:]))
	}
	runtime.Main(func() { app.Main(os.Args) })
}
