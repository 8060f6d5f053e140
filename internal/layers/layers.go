// Package layers is the map of gvx: which package may import which. Rules
// is the one table (docs/architecture.md explains the layers); its test
// checks every package of the module against it with go list, and fails
// on a forbidden arrow, naming it and the rule, or on a package no row
// covers, so a new package gets a row and the table stays the map.
package layers

// A Rule covers the packages Pkgs matches (the first matching row of
// Rules covers a package). Patterns are module-relative ("runtime" is
// z.gfire.dev/gvx/runtime) unless their first element has a dot
// ("gvisor.dev/..."); "X/..." matches X and everything below it. The
// rules are on everything a package links (go list's Deps), not only what
// it names.
type Rule struct {
	Pkgs string
	// Ours, unless nil, lists all the module's packages the covered
	// packages may link.
	Ours []string
	// Ext, unless nil, lists all the packages outside the module and the
	// standard library they may link.
	Ext []string
	// Never lists packages they must not link.
	Never []string
	// Why is the reason, quoted when the rule is broken.
	Why string
}

// cli: only commands (and internal/cliconv, their shared conventions)
// link the CLI framework.
const cli = "github.com/urfave/cli/..."

// aboveImage lists every layer above image (and gVisor and the CLI
// framework): image links none of them.
var aboveImage = []string{"spec/...", "runtime/...", "pkg/...", "golden/...", "agent/...", "serve/...", "cmd/...", "gvisor.dev/...", cli}

// above lists every layer above storage: storage links none of them.
var above = append([]string{"image/..."}, aboveImage...)

// Rules is the table, lowest layer first.
var Rules = []Rule{
	{Pkgs: "internal/durable", Ours: []string{}, Ext: []string{"golang.org/x/sys/..."},
		Why: "the durable-publish helper is a leaf every writer links, down to reflink"},
	{Pkgs: "reflink/...", Ours: []string{"internal/durable"}, Ext: []string{"golang.org/x/sys/..."},
		Why: "reflink is a leaf (DESIGN.md): the runtime, the SDK and gvx-vol all use it"},
	{Pkgs: "sink/...", Never: above, Why: "storage is the bottom layer: it builds for linux, darwin and windows and knows nothing of images, runtime or serve"},
	{Pkgs: "jbd2/...", Never: above, Why: "storage is the bottom layer"},
	{Pkgs: "ext4lite/...", Never: above, Why: "storage is the bottom layer"},
	{Pkgs: "erofs/...", Never: above, Why: "storage is the bottom layer"},
	{Pkgs: "overlay/...", Never: above, Why: "storage is the bottom layer"},
	{Pkgs: "image/...", Never: aboveImage, Why: "images sit on storage, below spec, the runtime and everything that runs a sandbox"},
	{Pkgs: "internal/cliconv", Ours: []string{"internal/..."},
		Why: "internal/cliconv holds the commands' shared CLI conventions"},
	{Pkgs: "internal/...", Ours: []string{"internal/...", "patches/..."}, Never: []string{cli},
		Why: "internal helpers link only each other (and the gVisor patch series' data)"},
	{Pkgs: "spec", Ours: []string{"internal/...", "runtime/egress"}, Never: []string{"gvisor.dev/...", cli},
		Why: "spec is the plain description of a sandbox, read by the runtime, the SDK and serve alike (runtime/egress: the egress policy type it embeds)"},
	{Pkgs: "runtime/net", Ours: []string{"internal/...", "spec", "runtime/egress", "erofs/...", "sink/..."}, Never: []string{cli},
		Why: "the episode's network (NAT, relays, publishing) is handed what the plan says: it links the spec, the egress policy and the image cache (the relay's image), never the runtime root, its process tree or its lockdown"},
	{Pkgs: "runtime/...", Never: []string{"pkg/...", "golden/...", "agent/...", "serve/...", "cmd/...", cli},
		Why: "the runtime is below the SDK, the episode server and the commands"},
	{Pkgs: "pkg/gvx/...", Never: []string{"runtime", "gvisor.dev/...", "golden/...", "agent/...", "serve/...", "cmd/...", cli},
		Why: "the SDK runs the rungv binary rather than linking the runtime and gVisor, and is below serve and the commands"},
	{Pkgs: "golden/...", Never: []string{"runtime", "gvisor.dev/...", "agent/...", "serve/...", "cmd/...", cli},
		Why: "golden builds through the SDK, and gvx-vol links it without gVisor"},
	{Pkgs: "agent/...", Never: []string{"runtime", "gvisor.dev/...", "pkg/...", "serve/...", "cmd/...", cli},
		Why: "the in-guest agent is small and links no runtime, SDK or server"},
	{Pkgs: "serve/...", Never: []string{"cmd/...", cli},
		Why: "the episode server is a library the rungv serve command wraps"},
	{Pkgs: "cmd/gvx-vol/...", Never: []string{"runtime", "gvisor.dev/..."},
		Why: "gvx-vol never links gVisor or the runtime: it starts fast and builds for darwin and windows"},
	{Pkgs: "cmd/...", Why: "commands are the top: they may link anything"},
	{Pkgs: "patches/...", Ours: []string{}, Ext: []string{},
		Why: "the gVisor patch series is data for cmd/gvisorpatch and the runtime's build"},
	{Pkgs: "bench/...", Never: []string{cli}, Why: "benchmark tools, outside the product"},
	{Pkgs: "fuzz/...", Never: []string{cli}, Why: "fuzz harnesses, outside the product"},
}
