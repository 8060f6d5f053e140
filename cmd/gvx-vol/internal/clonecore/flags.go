package clonecore

import (
	"flag"
	"io"
	"strings"
)

// ArgsUsage is the clone verb's argument synopsis, in its help and usage
// errors.
const ArgsUsage = "SRC DST | -n N SRC PATTERN | --probe DIR..."

// Kind is a flag's value type.
type Kind int

// The flag kinds clone uses.
const (
	Bool Kind = iota
	Int
	String
)

// Flag is one of clone's flags. Both parsers are built from Flags, so the
// two cannot disagree on a name, an alias, a type or a default.
type Flag struct {
	Name  string
	Alias string // a second name ("" if none)
	Kind  Kind
	// Default is the String flag's default value ("" for the others, whose
	// zero value is the default).
	Default string
	// DefaultText is shown in help instead of the default value.
	DefaultText string
	Usage       string
}

// Flags are clone's flags, in help order.
var Flags = []Flag{
	{Name: "reflink", Kind: String, Default: "always", Usage: "`WHEN` to clone: always (clone or fail), auto (clone, else sparse copy), never (sparse copy)"},
	{Name: "force", Alias: "f", Kind: Bool, Usage: "replace an existing DST (atomically)"},
	{Name: "count", Alias: "n", Kind: Int, Usage: "make `N` clones; DST is a pattern such as ep-%04d.ext4"},
	{Name: "start", Kind: Int, DefaultText: "0", Usage: "first index with --count"},
	{Name: "no-sync", Kind: Bool, Usage: "skip the fsyncs (most of the latency): for scratch episode volumes only; a crash may lose DST"},
	{Name: "json", Kind: Bool, Usage: "print the result as JSON (method and latency per clone)"},
	{Name: "quiet", Alias: "q", Kind: Bool, Usage: "print nothing on success"},
	{Name: "probe", Kind: Bool, Usage: "only tell whether each DIR argument can clone"},
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

// Parse parses the arguments after "clone" as urfave/cli would for the
// clone command (package flag's syntax: -x and --x alike, --x=v or --x v,
// parsing stops at the first argument that is not a flag or at "--"). It
// reports false where it would not give urfave/cli's result: a parse
// error or -h/--help (urfave/cli prints help or its own message), two
// names of one flag (urfave/cli refuses that), a flag-like argument after
// the flags (--generate-bash-completion, a late --help). The caller then
// runs the full CLI instead.
func Parse(args []string) (Request, bool) {
	fs := flag.NewFlagSet("clone", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	bools := map[string]*bool{}
	ints := map[string]*int{}
	strs := map[string]*string{}
	for _, f := range Flags {
		for _, name := range []string{f.Name, f.Alias} {
			if name == "" {
				continue
			}
			switch f.Kind {
			case Bool:
				if bools[f.Name] == nil {
					bools[f.Name] = new(bool)
				}
				fs.BoolVar(bools[f.Name], name, false, "")
			case Int:
				if ints[f.Name] == nil {
					ints[f.Name] = new(int)
				}
				fs.IntVar(ints[f.Name], name, 0, "")
			case String:
				if strs[f.Name] == nil {
					strs[f.Name] = new(string)
				}
				fs.StringVar(strs[f.Name], name, f.Default, "")
			}
		}
	}
	if err := fs.Parse(args); err != nil {
		return Request{}, false
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, f := range Flags {
		if f.Alias != "" && set[f.Name] && set[f.Alias] {
			return Request{}, false
		}
	}
	for _, a := range fs.Args() {
		if strings.HasPrefix(a, "-") {
			return Request{}, false
		}
	}
	isSet := func(name string) bool {
		for _, f := range Flags {
			if f.Name == name {
				return set[f.Name] || (f.Alias != "" && set[f.Alias])
			}
		}
		return false
	}
	return Request{
		Reflink:  *strs["reflink"],
		Force:    *bools["force"],
		NoSync:   *bools["no-sync"],
		JSON:     *bools["json"],
		Quiet:    *bools["quiet"],
		Probe:    *bools["probe"],
		Count:    *ints["count"],
		Start:    *ints["start"],
		CountSet: isSet("count"),
		StartSet: isSet("start"),
		Args:     fs.Args(),
	}, true
}
