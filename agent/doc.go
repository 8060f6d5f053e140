// Package agent is the in-guest half of the episode server (package
// z.gfire.dev/gvx/serve): a small HTTP/1.1 service that runs inside each
// episode's sandbox and executes commands, reads and writes files, and
// packs and unpacks tar archives there, on behalf of the server.
//
// How it gets there: the server runs every episode with the agent as its
// main process — the rungv binary's hidden verb `_gvx-agent`, which the
// guest already has at /.gvx/rungv (the relay image, see
// runtime/net/relayimage.go; cmd/rungv's main dispatches the verb to Main, so
// no runtime package imports this one) — listening on 127.0.0.1:Port in the guest's own
// netstack. The server publishes that port as a host unix socket (rungv's
// -p unix:SOCK:PORT), so nothing but the server reaches it. An optional
// service command (dockerd, a database) is started by the agent as its
// child, with the episode's stdout and stderr.
//
// The protocol (all bodies bounded; every error a JSON {"error": "…"}):
//
//	GET  /health                     {"ok":true,"service":{…}}
//	POST /exec      ExecRequest      NDJSON stream of Event, ending in one
//	                                 "exit" or "error" event
//	GET  /file?path=P                the file's bytes
//	PUT  /file?path=P&mode=0644      body → P (parents made, truncated)
//	GET  /archive?path=P             tar of P (entries named base(P)/…)
//	PUT  /archive?path=D             tar body unpacked into D (made)
//
// Trust boundary: the agent runs with the guest's privileges and is as
// hostile as the guest — the server treats everything it says as untrusted
// bytes (bounded reads, validated JSON) and never acts on a path it
// returns. What the agent does to the guest's own files cannot reach the
// host.
package agent
