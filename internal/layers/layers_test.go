package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const module = "z.gfire.dev/gvx"

type pkg struct {
	ImportPath string
	Imports    []string
	Standard   bool
	Module     *struct{ Path string }
}

// short is p module-relative, or p itself outside the module.
func short(p string) string {
	if r, ok := strings.CutPrefix(p, module+"/"); ok {
		return r
	}
	return p
}

// match reports whether the full import path p matches pattern, which is
// module-relative unless its first element has a dot.
func match(pattern, p string) bool {
	if first, _, _ := strings.Cut(pattern, "/"); !strings.Contains(first, ".") {
		pattern = module + "/" + pattern
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}

func matchAny(patterns []string, p string) bool {
	for _, pat := range patterns {
		if match(pat, p) {
			return true
		}
	}
	return false
}

// graph lists the module's packages and everything they link (not their
// tests), as go list -deps -json says for this GOOS.
func graph(t *testing.T) (ours []string, pkgs map[string]*pkg) {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports,Standard,Module", module+"/...")
	// The plain module graph: GOFLAGS may hold cmd/gvisorpatch's overlay,
	// which builds only with its go.work (a GOWORK=off list of it fails).
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, stderr.Bytes())
	}
	pkgs = map[string]*pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := new(pkg)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list -deps: %v", err)
		}
		pkgs[p.ImportPath] = p
		if p.Module != nil && p.Module.Path == module {
			ours = append(ours, p.ImportPath)
		}
	}
	return ours, pkgs
}

// chains returns, for each package from links, the import chain to it.
func chains(from string, pkgs map[string]*pkg) map[string][]string {
	via := map[string][]string{from: {from}}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, q := range pkgs[p].Imports {
			if _, seen := via[q]; seen || pkgs[q] == nil {
				continue
			}
			via[q] = append(append([]string(nil), via[p]...), q)
			queue = append(queue, q)
		}
	}
	delete(via, from)
	return via
}

// check returns one line per broken rule and uncovered package.
func check(ours []string, pkgs map[string]*pkg, rules []Rule) []string {
	var bad []string
	used := map[int]bool{}
	for _, p := range ours {
		ri := -1
		for i, r := range rules {
			if match(r.Pkgs, p) {
				ri = i
				break
			}
		}
		if ri < 0 {
			bad = append(bad, short(p)+" is covered by no row of layers.Rules: add one (internal/layers/layers.go) saying what it may link, and a line in docs/architecture.md")
			continue
		}
		used[ri] = true
		r := rules[ri]
		for q, chain := range chains(p, pkgs) {
			dep := pkgs[q]
			if dep.Standard {
				continue
			}
			mine := dep.Module != nil && dep.Module.Path == module
			var why string
			switch {
			case matchAny(r.Never, q):
				why = "it must never link it"
			case mine && r.Ours != nil && !matchAny(r.Ours, q):
				why = "it may link only " + list(r.Ours) + " of this module"
			case !mine && r.Ext != nil && !matchAny(r.Ext, q):
				why = "it may link only " + list(r.Ext) + " outside this module and the standard library"
			default:
				continue
			}
			for i := range chain {
				chain[i] = short(chain[i])
			}
			bad = append(bad, short(p)+" links "+short(q)+" ("+strings.Join(chain, " → ")+"): rule "+r.Pkgs+": "+why+" ("+r.Why+")")
		}
	}
	for i, r := range rules {
		if !used[i] {
			bad = append(bad, "row "+r.Pkgs+" covers no package: remove it or fix its pattern")
		}
	}
	sort.Strings(bad)
	return bad
}

func list(s []string) string {
	if len(s) == 0 {
		return "nothing"
	}
	return strings.Join(s, ", ")
}

// TestLayers: every package of the module is covered by a row of Rules
// and links nothing its row forbids.
func TestLayers(t *testing.T) {
	ours, pkgs := graph(t)
	for _, b := range check(ours, pkgs, Rules) {
		t.Error(b)
	}
}

// TestLayersCatch: the check finds a forbidden arrow, naming it and the
// rule, and a package without a row. The graph is the real one with one
// arrow added, as if runtime/cgroup imported serve, then as if
// runtime/net imported the runtime root.
func TestLayersCatch(t *testing.T) {
	ours, pkgs := graph(t)
	if len(check(ours, pkgs, Rules)) > 0 {
		t.Skip("TestLayers fails already")
	}
	cg := pkgs[module+"/runtime/cgroup"]
	if cg == nil || pkgs[module+"/serve"] == nil {
		t.Fatal("go list lists no runtime/cgroup or no serve")
	}
	cg.Imports = append(cg.Imports, module+"/serve")
	got := strings.Join(check(ours, pkgs, Rules), "\n")
	for _, want := range []string{"runtime/cgroup links serve (runtime/cgroup → serve): rule runtime/...", "runtime links serve (runtime → runtime/cgroup → serve)"} {
		if !strings.Contains(got, want) {
			t.Errorf("with runtime/cgroup → serve the check says:\n%s\nwant a line with %q", got, want)
		}
	}
	cg.Imports = cg.Imports[:len(cg.Imports)-1]
	// runtime/net reaching up into the runtime root (the plan, the
	// process tree) fails under its own row.
	nt := pkgs[module+"/runtime/net"]
	if nt == nil {
		t.Fatal("go list lists no runtime/net")
	}
	nt.Imports = append(nt.Imports, module+"/runtime")
	got = strings.Join(check(ours, pkgs, Rules), "\n")
	if want := "runtime/net links runtime (runtime/net → runtime): rule runtime/net"; !strings.Contains(got, want) {
		t.Errorf("with runtime/net → runtime the check says:\n%s\nwant a line with %q", got, want)
	}
	nt.Imports = nt.Imports[:len(nt.Imports)-1]
	pkgs[module+"/newpkg"] = &pkg{ImportPath: module + "/newpkg", Module: &struct{ Path string }{module}}
	got = strings.Join(check(append(ours, module+"/newpkg"), pkgs, Rules), "\n")
	if !strings.Contains(got, "newpkg is covered by no row") {
		t.Errorf("a package without a row: the check says:\n%s", got)
	}
}
