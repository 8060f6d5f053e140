package clonecmd

import (
	"io"
	"reflect"
	"regexp"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestRequest: clone's command lines, as urfave/cli parses them, into the
// Request the verb runs (the flags' names, aliases, defaults and IsSet).
func TestRequest(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want Request
	}{
		{[]string{"a", "b"}, Request{Reflink: "always", Args: []string{"a", "b"}}},
		{[]string{"--no-sync", "-q", "a", "b"}, Request{Reflink: "always", NoSync: true, Quiet: true, Args: []string{"a", "b"}}},
		{[]string{"-n", "3", "--start=0", "a", "b"}, Request{Reflink: "always", Count: 3, CountSet: true, StartSet: true, Args: []string{"a", "b"}}},
		{[]string{"--count", "0x10", "a", "b"}, Request{Reflink: "always", Count: 16, CountSet: true, Args: []string{"a", "b"}}},
		{[]string{"-reflink", "auto", "-f", "--json", "--probe", "d"}, Request{Reflink: "auto", Force: true, JSON: true, Probe: true, Args: []string{"d"}}},
		{[]string{"--", "-a", "b"}, Request{Reflink: "always", Args: []string{"-a", "b"}}},
	} {
		var got Request
		cmd := Command()
		cmd.Action = func(c *cli.Context) error { got = newRequest(c); return nil }
		app := &cli.App{Name: "gvx-vol", Commands: []*cli.Command{cmd}, Writer: io.Discard, ErrWriter: io.Discard}
		if err := app.Run(append([]string{"gvx-vol", "clone"}, tc.args...)); err != nil {
			t.Fatalf("clone %q: %v", tc.args, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("clone %q: %+v; want %+v", tc.args, got, tc.want)
		}
	}
}

// TestOneIntVerb: the scanner accepts exactly what the regexp it replaced
// did (one "%" in the pattern, and a match of %[-+ 0#]*[0-9]*d there).
func TestOneIntVerb(t *testing.T) {
	verb := regexp.MustCompile(`%[-+ 0#]*[0-9]*d`)
	old := func(p string) bool {
		n := 0
		for _, c := range p {
			if c == '%' {
				n++
			}
		}
		return len(verb.FindAllStringIndex(p, -1)) == 1 && n == 1
	}
	alphabet := []byte("%d-+ 0#59xs")
	// Every string of up to 5 symbols from alphabet, with a prefix.
	var gen func(prefix []byte, n int)
	count := 0
	gen = func(prefix []byte, n int) {
		p := "ep-" + string(prefix)
		if oneIntVerb(p) != old(p) {
			t.Errorf("oneIntVerb(%q) = %v, the regexp says %v", p, oneIntVerb(p), old(p))
		}
		count++
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			gen(append(prefix, c), n-1)
		}
	}
	gen(nil, 5)
	if count < 100000 {
		t.Fatalf("checked only %d patterns", count)
	}
}
