package runtime

import "z.gfire.dev/gvx/serve/agent"

// agentCmd is the hidden verb of the in-guest agent of `rungv serve`
// (package z.gfire.dev/gvx/serve/agent). Like the relay it runs inside the
// guest, as /.gvx/rungv: the episode server makes it the episode's command
// (the relay, the guest's init, starts it), listening on a guest port the
// server publishes as a host unix socket.
const agentCmd = agent.Verb

func agentMain(args []string) int { return agent.Main(args) }
