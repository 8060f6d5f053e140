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
