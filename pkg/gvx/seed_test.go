package gvx_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// seedGlob is where the project's user documents live on the development
// machine (not in the repository): the example kept in testdata must stay
// the seed's, byte for byte once line numbers are stripped.
const seedGlob = "/work/shared/seeds/000_*.txt"

var numbered = regexp.MustCompile(`^\s*\d+(.*)$`)

// extractSeedExample returns the Go example of a seed document: from
// "package main" to the closing brace of main, line numbers stripped.
func extractSeedExample(doc string) string {
	lines := strings.Split(doc, "\n")
	start := -1
	for i, l := range lines {
		if m := numbered.FindStringSubmatch(l); m != nil && strings.TrimSpace(m[1]) == "package main" {
			start = i
			break
		}
	}
	if start < 0 {
		return ""
	}
	var out []string
	inMain := false
	for _, l := range lines[start:] {
		m := numbered.FindStringSubmatch(l)
		if m == nil {
			if len(out) > 0 && strings.TrimSpace(l) == "" {
				out = append(out, "")
				continue
			}
			break
		}
		out = append(out, m[1])
		if strings.HasPrefix(m[1], "func main()") {
			inMain = true
		}
		if inMain && m[1] == "}" {
			break
		}
	}
	return strings.Join(out, "\n") + "\n"
}

func TestSeedExampleMatchesSeed(t *testing.T) {
	seeds, _ := filepath.Glob(seedGlob)
	if len(seeds) == 0 {
		t.Skip("seed documents are not on this machine (" + seedGlob + ")")
	}
	doc, err := os.ReadFile(seeds[0])
	if err != nil {
		t.Fatal(err)
	}
	kept, err := os.ReadFile("testdata/seed_example.go.txt")
	if err != nil {
		t.Fatal(err)
	}
	if got := extractSeedExample(string(doc)); got != string(kept) {
		t.Fatalf("testdata/seed_example.go.txt differs from the seed's example:\n--- seed\n%s\n--- kept\n%s", got, kept)
	}
}

// TestSeedExampleCompiles builds (and vets) the seed's Go SDK example,
// unchanged, in a module that replaces z.gfire.dev/gvx with this tree.
func TestSeedExampleCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	src, err := os.ReadFile("testdata/seed_example.go.txt")
	if err != nil {
		t.Fatal(err)
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/rollout\n\ngo 1.26\n\nrequire z.gfire.dev/gvx v0.0.0\n\nreplace z.gfire.dev/gvx => " + repo + "\n"
	for name, body := range map[string]string{"go.mod": gomod, "main.go": string(src)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if sum, err := os.ReadFile(filepath.Join(repo, "go.sum")); err == nil {
		if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"build", "-o", filepath.Join(dir, "rollout"), "."}, {"vet", "."}} {
		cmd := exec.Command(goBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
