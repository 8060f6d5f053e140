package runtime

import (
	gvisorseries "z.gfire.dev/gvx/patches/gvisor"
)

// gvisorPatches names the patches of patches/gvisor this binary's gVisor
// was built with. It stays empty in a plain `go build` (upstream gVisor, as
// go.mod pins it); the overlay of cmd/gvisorpatch adds gvisorpatches_gen.go,
// whose init sets it from the patched gVisor's own list
// (gvisor.dev/gvisor/pkg/gvxpatches, which only the patched copy has).
var gvisorPatches []string

// GVisorPatch is one patch of gvx's gVisor series and whether this binary
// has it (rungv info).
type GVisorPatch struct {
	Name    string `json:"name"`
	Applied bool   `json:"applied"`
	// Enables is what the patch buys; Lacks, for a patch this build does
	// not have, what it lacks without it.
	Enables string `json:"enables"`
	Lacks   string `json:"lacks,omitempty"`
}

// GVisorPatches lists every patch of the series embedded in this binary,
// applied or not, then any applied patch the series does not know (a
// binary built from another checkout's overlay). Build with
// scripts/build.sh (or eval "$(go run ./cmd/gvisorpatch env)") to have
// them all.
func GVisorPatches() []GVisorPatch {
	applied := map[string]bool{}
	for _, n := range gvisorPatches {
		applied[n] = true
	}
	series, err := gvisorseries.Series()
	var out []GVisorPatch
	if err != nil {
		out = append(out, GVisorPatch{Name: "(series unreadable)", Lacks: err.Error()})
	}
	for _, p := range series {
		gp := GVisorPatch{Name: p.Name, Applied: applied[p.Name], Enables: p.Enables}
		if !gp.Applied {
			gp.Lacks = p.Lacks
		}
		delete(applied, p.Name)
		out = append(out, gp)
	}
	for _, n := range gvisorPatches {
		if applied[n] {
			out = append(out, GVisorPatch{Name: n, Applied: true, Enables: "(not in this checkout's series)"})
		}
	}
	return out
}

// HasGVisorPatch reports whether this binary's gVisor has the named patch
// ("0001-pidns-init-signals").
func HasGVisorPatch(name string) bool {
	for _, n := range gvisorPatches {
		if n == name {
			return true
		}
	}
	return false
}
