package app

import (
	"bytes"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestHelpFits80Columns: gvx-vol's help and every verb's, USAGE line and
// flags included, within 80 columns.
func TestHelpFits80Columns(t *testing.T) {
	var paths [][]string
	var walk func(prefix []string, cs []*cli.Command)
	walk = func(prefix []string, cs []*cli.Command) {
		for _, c := range cs {
			p := append(append([]string{}, prefix...), c.Name)
			paths = append(paths, p)
			walk(p, c.Subcommands)
		}
	}
	walk(nil, New(nil).Commands)
	paths = append(paths, nil)
	for _, p := range paths {
		var out bytes.Buffer
		args := append(append([]string{"gvx-vol"}, p...), "--help")
		a := New(args)
		a.Writer, a.ErrWriter = &out, &out
		if err := a.Run(args); err != nil {
			t.Fatalf("%v --help: %v", p, err)
		}
		if !strings.Contains(out.String(), "USAGE") {
			t.Fatalf("%v --help printed no usage:\n%s", p, out.String())
		}
		for _, l := range strings.Split(out.String(), "\n") {
			if n := len([]rune(l)); n > 80 {
				t.Errorf("gvx-vol %s --help: %d columns: %s", strings.Join(p, " "), n, l)
			}
		}
	}
}

// TestVerbs: each verb is selected by its command's name (a verb whose
// name drifted from its entry would run with every other verb built, or
// the wrong one), has no alias the selection would miss, and New for a
// command line naming a verb holds that verb alone; any other command line
// gets every verb, in help order.
func TestVerbs(t *testing.T) {
	all := New(nil).Commands
	if len(all) != len(verbs) {
		t.Fatalf("New(nil) has %d commands, want %d", len(all), len(verbs))
	}
	for i, v := range verbs {
		c := v.make()
		if c.Name != v.name || len(c.Aliases) != 0 {
			t.Errorf("verbs[%d] %q makes command %q aliases %q", i, v.name, c.Name, c.Aliases)
		}
		if all[i].Name != v.name {
			t.Errorf("New(nil).Commands[%d] is %q, want %q", i, all[i].Name, v.name)
		}
		cs := New([]string{"gvx-vol", v.name, "--help"}).Commands
		if len(cs) != 1 || cs[0].Name != v.name {
			t.Errorf("New(gvx-vol %s --help) has %d commands", v.name, len(cs))
		}
	}
	for _, args := range [][]string{{"gvx-vol"}, {"gvx-vol", "--help"}, {"gvx-vol", "clon"}, {"gvx-vol", "-q", "clone"}} {
		if n := len(New(args).Commands); n != len(verbs) {
			t.Errorf("New(%q) has %d commands, want all %d", args, n, len(verbs))
		}
	}
}
