package fastflag_test

import (
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/cmd/gvx-vol/internal/fastflag"
)

var spec = []fastflag.Flag{
	{Name: "mode", Kind: fastflag.String, Default: "always"},
	{Name: "force", Alias: "f", Kind: fastflag.Bool},
	{Name: "count", Alias: "n", Kind: fastflag.Int},
	{Name: "start", Kind: fastflag.Int, DefaultText: "0"},
	{Name: "l", Kind: fastflag.Bool},
}

// seen is what a parser gave a verb.
type seen struct {
	Bools, IsSet map[string]bool
	Ints         map[string]int
	Strs         map[string]string
	Args         []string
}

type flagger interface {
	Bool(string) bool
	Int(string) int
	String(string) string
	IsSet(string) bool
}

func record(f flagger, args []string) seen {
	s := seen{Bools: map[string]bool{}, IsSet: map[string]bool{}, Ints: map[string]int{}, Strs: map[string]string{}, Args: args}
	for _, fl := range spec {
		s.IsSet[fl.Name] = f.IsSet(fl.Name)
		switch fl.Kind {
		case fastflag.Bool:
			s.Bools[fl.Name] = f.Bool(fl.Name)
		case fastflag.Int:
			s.Ints[fl.Name] = f.Int(fl.Name)
		case fastflag.String:
			s.Strs[fl.Name] = f.String(fl.Name)
		}
	}
	if s.Args == nil {
		s.Args = []string{}
	}
	return s
}

// urfave parses args as the full CLI does (flags from cliutil.Flags(spec)).
func urfave(t *testing.T, args []string) (seen, bool) {
	var got seen
	ran := false
	app := &cli.App{Name: "x", Writer: io.Discard, ErrWriter: io.Discard, ExitErrHandler: func(*cli.Context, error) {},
		Commands: []*cli.Command{{Name: "verb", Flags: cliutil.Flags(spec), Action: func(c *cli.Context) error {
			got, ran = record(c, c.Args().Slice()), true
			return nil
		}}}}
	err := app.Run(append([]string{"x", "verb"}, args...))
	return got, err == nil && ran
}

// TestParseAsUrfave: where Parse accepts a command line, urfave/cli gives
// the verb the same values, the same IsSet answers and the same arguments;
// Parse refuses the lines urfave/cli answers itself (help, errors).
func TestParseAsUrfave(t *testing.T) {
	for _, line := range []string{
		"", "a b", "--force a", "-f a b", "--force=false a", "-force=1 a", "-n 3 a", "--count=0x10 a", "--count -2 a",
		"--start 0 a", "--mode never a", "-mode=auto", "--mode= a", "-l", "--l a", "-l=false a", "-- a b", "a -- b",
		"-n 1 -n 2 a", "-f -f a", "--count 007 a",
		// refused: urfave/cli answers these itself
		"--help", "-h", "-help", "--help=false a", "a --force", "--bogus", "--count", "--count x", "-f --force",
		"-n 2 --count 2 a", "--force=maybe a", "a --generate-bash-completion", "-- -a",
	} {
		args := strings.Fields(line)
		v, ok := fastflag.Parse(spec, args)
		want, wantOK := urfave(t, args)
		if !ok {
			if strings.Contains(line, "help") || !wantOK {
				continue // urfave/cli prints help or an error: the full CLI must answer
			}
			// Refused though urfave/cli runs the verb: allowed (the full
			// CLI answers), but only for a flag-like argument after the
			// flags, where urfave/cli's handling is its own.
			if !strings.Contains(strings.Join(want.Args, " "), "-") {
				t.Errorf("Parse refused %q, which urfave/cli runs as %+v", line, want)
			}
			continue
		}
		if !wantOK {
			t.Errorf("Parse accepted %q, which urfave/cli refuses", line)
			continue
		}
		if got := record(v, v.Args); !reflect.DeepEqual(got, want) {
			t.Errorf("%q:\n Parse    %+v\n urfave   %+v", line, got, want)
		}
	}
}
