// Package fastflag parses a verb's flags with package flag exactly as
// urfave/cli/v2 parses them for that verb, or says it cannot: the gvx-vol
// binary answers its fast verbs (clone, info, ls) with it, without linking
// urfave/cli, and hands every command line it cannot parse the same way to
// gvx-vol-tools (package helper), whose urfave/cli then answers it. Each
// verb declares its flags once, as []Flag; cliutil.Flags turns them into
// urfave/cli flags for the full CLI, so the two parsers cannot disagree on
// a name, an alias, a type or a default.
//
// The package must not import urfave/cli or anything whose initialisation
// is heavy: every clone pays for what the gvx-vol binary links.
package fastflag

import (
	"flag"
	"io"
	"strings"
)

// Kind is a flag's value type.
type Kind int

// The flag kinds gvx-vol's fast verbs use.
const (
	Bool Kind = iota
	Int
	String
)

// Flag is one flag of a verb.
type Flag struct {
	Name  string
	Alias string // a second name ("" if none)
	Kind  Kind
	// Default is a String flag's default value ("" for the other kinds,
	// whose zero value is the default).
	Default string
	// DefaultText is shown in help instead of the default value.
	DefaultText string
	Usage       string
}

// Flagger is what a verb reads its flags through: *Values here, and
// urfave/cli's *cli.Context in the full CLI.
type Flagger interface {
	Bool(name string) bool
	Int(name string) int
	String(name string) string
	IsSet(name string) bool
}

// RunFunc runs a fast verb: its flags read through f, args the arguments
// after them, output to w; helpName names the verb in usage errors
// ("gvx-vol clone").
type RunFunc func(w io.Writer, helpName string, f Flagger, args []string) error

// Values are a parsed command line: the flags' values and the arguments
// after them.
type Values struct {
	flags []Flag
	bools map[string]*bool
	ints  map[string]*int
	strs  map[string]*string
	set   map[string]bool // by each name given on the command line
	Args  []string
}

// Parse parses args (the arguments after the verb) against flags as
// urfave/cli/v2 would for a verb without subcommands (package flag's
// syntax: -x and --x alike, --x=v or --x v, parsing stops at the first
// argument that is not a flag or after "--"). It reports false where it
// would not give urfave/cli's result: a parse error or -h/--help
// (urfave/cli prints help or its own message), both names of one flag
// (urfave/cli refuses that), a flag-like argument after the flags
// (--generate-bash-completion, a late --help, which urfave/cli treats in
// its own ways). The caller then runs the full CLI instead.
func Parse(flags []Flag, args []string) (*Values, bool) {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	v := &Values{flags: flags, bools: map[string]*bool{}, ints: map[string]*int{}, strs: map[string]*string{}, set: map[string]bool{}}
	for _, f := range flags {
		for _, name := range []string{f.Name, f.Alias} {
			if name == "" {
				continue
			}
			switch f.Kind {
			case Bool:
				if v.bools[f.Name] == nil {
					v.bools[f.Name] = new(bool)
				}
				fs.BoolVar(v.bools[f.Name], name, false, "")
			case Int:
				if v.ints[f.Name] == nil {
					v.ints[f.Name] = new(int)
				}
				fs.IntVar(v.ints[f.Name], name, 0, "")
			case String:
				if v.strs[f.Name] == nil {
					v.strs[f.Name] = new(string)
				}
				fs.StringVar(v.strs[f.Name], name, f.Default, "")
			}
		}
	}
	if err := fs.Parse(args); err != nil {
		return nil, false
	}
	fs.Visit(func(f *flag.Flag) { v.set[f.Name] = true })
	for _, f := range flags {
		if f.Alias != "" && v.set[f.Name] && v.set[f.Alias] {
			return nil, false
		}
	}
	for _, a := range fs.Args() {
		if strings.HasPrefix(a, "-") {
			return nil, false
		}
	}
	v.Args = fs.Args()
	return v, true
}

// Bool is the value of the Bool flag name (false if flags has none).
func (v *Values) Bool(name string) bool {
	if p := v.bools[name]; p != nil {
		return *p
	}
	return false
}

// Int is the value of the Int flag name (0 if flags has none).
func (v *Values) Int(name string) int {
	if p := v.ints[name]; p != nil {
		return *p
	}
	return 0
}

// String is the value of the String flag name ("" if flags has none).
func (v *Values) String(name string) string {
	if p := v.strs[name]; p != nil {
		return *p
	}
	return ""
}

// IsSet reports whether the flag name was given, under either of its
// names (urfave/cli's Context.IsSet).
func (v *Values) IsSet(name string) bool {
	for _, f := range v.flags {
		if f.Name == name {
			return v.set[f.Name] || (f.Alias != "" && v.set[f.Alias])
		}
	}
	return false
}
