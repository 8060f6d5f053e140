package clonecore

import "z.gfire.dev/gvx/cmd/gvx-vol/internal/fastflag"

// ArgsUsage is the clone verb's argument synopsis, in its help and usage
// errors.
const ArgsUsage = "SRC DST | -n N SRC PATTERN | --probe DIR..."

// Flags are clone's flags, in help order, for both parsers.
var Flags = []fastflag.Flag{
	{Name: "reflink", Kind: fastflag.String, Default: "always", Usage: "`WHEN` to clone: always (clone or fail), auto (clone, else sparse copy), never (sparse copy)"},
	{Name: "force", Alias: "f", Kind: fastflag.Bool, Usage: "replace an existing DST (atomically)"},
	{Name: "count", Alias: "n", Kind: fastflag.Int, Usage: "make `N` clones; DST is a pattern such as ep-%04d.ext4"},
	{Name: "start", Kind: fastflag.Int, DefaultText: "0", Usage: "first index with --count"},
	{Name: "no-sync", Kind: fastflag.Bool, Usage: "skip the fsyncs (most of the latency): for scratch episode volumes only; a crash may lose DST"},
	{Name: "json", Kind: fastflag.Bool, Usage: "print the result as JSON (method and latency per clone)"},
	{Name: "quiet", Alias: "q", Kind: fastflag.Bool, Usage: "print nothing on success"},
	{Name: "probe", Kind: fastflag.Bool, Usage: "only tell whether each DIR argument can clone"},
}

// Request is a parsed clone command line: the flags' values and the
// arguments after them.
type Request struct {
	Reflink                    string
	Force, NoSync, JSON, Quiet bool
	Probe                      bool
	Count, Start               int
	CountSet, StartSet         bool // given on the command line
	Args                       []string
}

// newRequest reads clone's flags from f, with args the arguments after them.
func newRequest(f fastflag.Flagger, args []string) Request {
	return Request{
		Reflink:  f.String("reflink"),
		Force:    f.Bool("force"),
		NoSync:   f.Bool("no-sync"),
		JSON:     f.Bool("json"),
		Quiet:    f.Bool("quiet"),
		Probe:    f.Bool("probe"),
		Count:    f.Int("count"),
		Start:    f.Int("start"),
		CountSet: f.IsSet("count"),
		StartSet: f.IsSet("start"),
		Args:     args,
	}
}
