// Command gvisorpatch applies gvx's gVisor patch series (patches/gvisor) to
// the pinned module and prints how to build with it: the one mechanism
// scripts/test.sh, scripts/demo.sh, scripts/build.sh and README's build line
// use.
//
//	GOWORK=off go run ./cmd/gvisorpatch env   # prints: export GOWORK=… GOFLAGS='-overlay=FILE …'
//	GOWORK=off go run ./cmd/gvisorpatch list  # the series: what each patch enables
//
// so that `eval "$(GOWORK=off go run ./cmd/gvisorpatch env)"` makes every
// later go build and go test of the shell (and the go builds those tests
// run) compile the patched gVisor. GOWORK names a go.work that replaces
// gvisor.dev/gvisor by a patched copy (go refuses -overlay for files in the
// module cache); GOFLAGS keeps what `go env GOFLAGS` had, less any earlier
// -overlay, and adds the -overlay that tells rungv its patches. GOWORK=off
// keeps the go run itself from reading an earlier workspace. The patched files live in a per-user cache
// ($GVX_GVISOR_PATCH_CACHE, default the user cache dir's
// gvx/gvisor-patches), checked and rewritten on every run; see
// docs/gvisor-patches.md.
package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"z.gfire.dev/gvx/internal/gvisorpatch"
	gvisorseries "z.gfire.dev/gvx/patches/gvisor"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: gvisorpatch env|list")
	}
	series, err := gvisorseries.Series()
	if err != nil {
		return err
	}
	switch args[0] {
	case "list":
		for _, p := range series {
			fmt.Printf("%s\n  enables:  %s\n  upstream: %s\n  test:     %s\n", p.Name, p.Enables, p.Upstream, p.Test)
		}
		return nil
	case "env":
	default:
		return fmt.Errorf("gvisorpatch: unknown verb %q: usage: gvisorpatch env|list", args[0])
	}
	flags, err := goOut("env", "GOFLAGS")
	if err != nil {
		return err
	}
	kept := withoutOverlay(flags)
	// The go commands below must not read an earlier overlay or workspace
	// (they may be gone, and the workspace's gVisor is the copy).
	os.Setenv("GOFLAGS", strings.Join(kept, " "))
	os.Setenv("GOWORK", "off")
	mainDir, err := goOut("list", "-m", "-f", "{{.Dir}}")
	if err != nil {
		return err
	}
	info, err := goOut("list", "-m", "-f", "{{.Dir}}|{{.Version}}", "gvisor.dev/gvisor")
	if err != nil {
		return err
	}
	dir, version, _ := strings.Cut(info, "|")
	if dir == "" {
		if _, err := goOut("mod", "download", "gvisor.dev/gvisor"); err != nil {
			return err
		}
		if info, err = goOut("list", "-m", "-f", "{{.Dir}}|{{.Version}}", "gvisor.dev/gvisor"); err != nil {
			return err
		}
		dir, version, _ = strings.Cut(info, "|")
	}
	if dir == "" {
		return fmt.Errorf("gvisorpatch: go list has no directory for gvisor.dev/gvisor %s even after go mod download", version)
	}
	cache, err := gvisorpatch.DefaultCacheDir()
	if err != nil {
		return err
	}
	res, err := gvisorpatch.Build(gvisorpatch.Config{GVisorDir: dir, GVisorVersion: version, MainDir: mainDir, CacheDir: cache}, series)
	if err != nil {
		return err
	}
	if len(res.Rewritten) > 0 {
		fmt.Fprintf(os.Stderr, "gvisorpatch: %s applied to gVisor %s in %s; (re)wrote %d file(s)\n", strings.Join(res.Applied, ", "), version, res.Tree, len(res.Rewritten))
	}
	fmt.Printf("export GOWORK='%s' GOFLAGS='%s'\n", res.Work, strings.Join(append([]string{"-overlay=" + res.Overlay}, kept...), " "))
	return nil
}

// withoutOverlay splits GOFLAGS and drops any -overlay flag.
func withoutOverlay(flags string) []string {
	var kept []string
	for _, f := range strings.Fields(flags) {
		if strings.HasPrefix(f, "-overlay=") || strings.HasPrefix(f, "--overlay=") {
			continue
		}
		kept = append(kept, f)
	}
	return kept
}

func goOut(args ...string) (string, error) {
	goBin := "go"
	if _, err := exec.LookPath(goBin); err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	var stderr bytes.Buffer
	c := exec.Command(goBin, args...)
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return "", fmt.Errorf("gvisorpatch: go %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
