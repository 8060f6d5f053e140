// Package gvisor is the patch series gvx carries against its pinned gVisor
// (go.mod's gvisor.dev/gvisor): unified diffs named NNNN-what-it-enables.patch,
// paths relative to the module's root, each with a header of "Key: value"
// lines (continued by indented lines) before its first "--- " line:
//
//	Name:     what the patch enables, in a few words (the file name's tail)
//	Enables:  what a build with it can do
//	Lacks:    what a build without it lacks (rungv info says this)
//	Upstream: the gVisor issue or TODO it addresses
//	Test:     the tests that fail without it
//
// internal/gvisorpatch applies the series to a copy of the module's files
// and writes a `go build -overlay` file (cmd/gvisorpatch); a build without
// the overlay is plain upstream gVisor and still works. The series is
// embedded here so that rungv info can name what a build has and lacks.
// docs/gvisor-patches.md says which patch buys what.
package gvisor

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"path"
	"sort"
	"strings"
)

//go:embed *.patch
var files embed.FS

// Patch is one patch of the series.
type Patch struct {
	// Name is the file name without ".patch" (0001-pidns-init-signals).
	Name string
	// Text is the whole file, header and diff.
	Text []byte
	// Enables, Lacks, Upstream and Test are the header's fields.
	Enables, Lacks, Upstream, Test string
}

// Series returns the patches in order (by file name).
func Series() ([]Patch, error) {
	ents, err := files.ReadDir(".")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	var ps []Patch
	for _, n := range names {
		b, err := files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		p, err := ParseHeader(strings.TrimSuffix(path.Base(n), ".patch"), b)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// Hash is the sha256 of a series: names and texts, in order.
func Hash(ps []Patch) string {
	h := sha256.New()
	for _, p := range ps {
		fmt.Fprintf(h, "%s\n%d\n", p.Name, len(p.Text))
		h.Write(p.Text)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ParseHeader reads a patch file's header fields. Every field the package
// doc lists must be there: a patch that does not say what it buys and what
// tests it is not taken.
func ParseHeader(name string, text []byte) (Patch, error) {
	p := Patch{Name: name, Text: text}
	fields := map[string]*string{"Enables": &p.Enables, "Lacks": &p.Lacks, "Upstream": &p.Upstream, "Test": &p.Test}
	var cur *string
	for _, line := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(line, "--- ") {
			break
		}
		if strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
			if cur != nil {
				*cur += " " + strings.TrimSpace(line)
			}
			continue
		}
		cur = nil
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if k == "Name" && strings.TrimSpace(v) != "" && !strings.HasSuffix(name, "-"+strings.TrimSpace(v)) {
			return p, fmt.Errorf("gvisor patch %s: its Name: %q is not the file name's tail: rename one of them", name, strings.TrimSpace(v))
		}
		if f := fields[k]; f != nil {
			*f = strings.TrimSpace(v)
			cur = f
		}
	}
	for _, k := range []string{"Enables", "Lacks", "Upstream", "Test"} {
		if *fields[k] == "" {
			return p, fmt.Errorf("gvisor patch %s: its header has no %s: line (see patches/gvisor's package doc)", name, k)
		}
	}
	return p, nil
}
