package clonecore

import (
	"reflect"
	"regexp"
	"testing"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/fastflag"
)

// TestParse: clone's command lines through fastflag, as the gvx-vol
// binary parses them, into the Request the verb runs.
func TestParse(t *testing.T) {
	def := Request{Reflink: "always"}
	for _, tc := range []struct {
		args []string
		want Request
		ok   bool
	}{
		{[]string{"a", "b"}, Request{Reflink: "always", Args: []string{"a", "b"}}, true},
		{[]string{"--no-sync", "-q", "a", "b"}, Request{Reflink: "always", NoSync: true, Quiet: true, Args: []string{"a", "b"}}, true},
		{[]string{"-n", "3", "--start=0", "a", "b"}, Request{Reflink: "always", Count: 3, CountSet: true, StartSet: true, Args: []string{"a", "b"}}, true},
		{[]string{"--count", "0x10", "a", "b"}, Request{Reflink: "always", Count: 16, CountSet: true, Args: []string{"a", "b"}}, true},
		{[]string{"-reflink", "auto", "-f", "--json", "--probe", "d"}, Request{Reflink: "auto", Force: true, JSON: true, Probe: true, Args: []string{"d"}}, true},
		{[]string{"--", "-a", "b"}, def, false}, // a flag-like SRC: urfave/cli's quirks decide
		{[]string{"-h"}, def, false},
		{[]string{"--help"}, def, false},
		{[]string{"--bogus", "a", "b"}, def, false},
		{[]string{"--count", "x", "a", "b"}, def, false},
		{[]string{"--count"}, def, false},
		{[]string{"-q", "--quiet", "a", "b"}, def, false}, // two names of one flag
		{[]string{"a", "b", "--force"}, def, false},
		{[]string{"a", "b", "--generate-bash-completion"}, def, false},
	} {
		var got Request
		v, ok := fastflag.Parse(Flags, tc.args)
		if ok {
			got = newRequest(v, v.Args)
		}
		if ok != tc.ok || (ok && !reflect.DeepEqual(got, tc.want)) {
			t.Errorf("Parse(%q) = %+v, %v; want %+v, %v", tc.args, got, ok, tc.want, tc.ok)
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
