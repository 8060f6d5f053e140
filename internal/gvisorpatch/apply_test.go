package gvisorpatch

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	gvisorseries "z.gfire.dev/gvx/patches/gvisor"
)

const base = "package x\n\nfunc a() int {\n\treturn 1\n}\n\nfunc b() int {\n\treturn 2\n}\n"

const goodDiff = `Name: ret
Enables: returns 3
Lacks: returns 2
Upstream: none
Test: this one

--- a/x/x.go
+++ b/x/x.go
@@ -7,3 +7,4 @@
 func b() int {
-	return 2
+	// patched
+	return 3
 }
`

func series(t *testing.T, name, text string) []gvisorseries.Patch {
	t.Helper()
	p, err := gvisorseries.ParseHeader(name, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return []gvisorseries.Patch{p}
}

func fakeModule(t *testing.T) string {
	d := t.TempDir()
	if err := os.MkdirAll(filepath.Join(d, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "x", "x.go"), []byte(base), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "go.mod"), []byte("module example.com/m\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestApply: a good patch applies; one whose context does not match the
// file fails naming the patch, the file, the hunk and the line.
func TestApply(t *testing.T) {
	mod := fakeModule(t)
	out, err := Apply(mod, series(t, "0001-ret", goodDiff))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(base, "\treturn 2\n", "\t// patched\n\treturn 3\n", 1); string(out["x/x.go"]) != want {
		t.Fatalf("got:\n%s\nwant:\n%s", out["x/x.go"], want)
	}
	bad := strings.Replace(goodDiff, "-\treturn 2", "-\treturn 9", 1)
	_, err = Apply(mod, series(t, "0002-ret", bad))
	if err == nil || !strings.Contains(err.Error(), "0002-ret") || !strings.Contains(err.Error(), "x/x.go") || !strings.Contains(err.Error(), "hunk 1 (@@ -7,3 +7,4 @@)") || !strings.Contains(err.Error(), "line 8") {
		t.Fatalf("a patch that does not fit: got %v", err)
	}
	moved := strings.Replace(goodDiff, "@@ -7,3 +7,4 @@", "@@ -6,3 +6,4 @@", 1)
	if _, err := Apply(mod, series(t, "0003-ret", moved)); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Fatalf("a hunk at the wrong line (no fuzz): got %v", err)
	}
	for _, evil := range []string{"../../etc/passwd", "/etc/passwd"} {
		p := strings.NewReplacer("a/x/x.go", "a/"+evil, "b/x/x.go", "b/"+evil).Replace(goodDiff)
		if evil[0] == '/' {
			p = strings.NewReplacer("a/x/x.go", evil, "b/x/x.go", evil).Replace(goodDiff)
		}
		if _, err := Apply(mod, series(t, "0004-ret", p)); err == nil || !strings.Contains(err.Error(), "not a clean path") {
			t.Fatalf("path %s: got %v", evil, err)
		}
	}
	short := strings.Replace(goodDiff, "+\treturn 3\n", "", 1)
	if _, err := Apply(mod, series(t, "0005-ret", short)); err == nil || !strings.Contains(err.Error(), "header says") {
		t.Fatalf("a truncated hunk: got %v", err)
	}
}

// TestBuildCache: Build writes the tree and the workspace; a tampered
// output, a stray .go file and a missing file are put right by the next
// Build; a cache directory another user could write is refused.
func TestBuildCache(t *testing.T) {
	mod := fakeModule(t)
	mainDir := t.TempDir()
	os.WriteFile(filepath.Join(mainDir, "go.mod"), []byte("module z.gfire.dev/gvx\n\ngo 1.26.3\n"), 0o644)
	cache := filepath.Join(t.TempDir(), "c")
	cfg := Config{GVisorDir: mod, GVisorVersion: "v1.0.0", MainDir: mainDir, CacheDir: cache}
	s := series(t, "0001-ret", goodDiff)
	res, err := Build(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	patched := filepath.Join(res.Tree, "src", "x", "x.go")
	if b, _ := os.ReadFile(patched); !strings.Contains(string(b), "return 3") {
		t.Fatalf("tree's x.go: %s", b)
	}
	if b, _ := os.ReadFile(filepath.Join(res.Tree, "src", "pkg", "gvxpatches", "gvxpatches.go")); !strings.Contains(string(b), "var Applied = []string{\n\t\"0001-ret\",\n}") {
		t.Fatalf("the tree's marker package names the patches it has: %s", b)
	}
	work, _ := os.ReadFile(res.Work)
	if !strings.Contains(string(work), "use "+mainDir) || !strings.Contains(string(work), "replace gvisor.dev/gvisor v1.0.0 => "+filepath.Join(res.Tree, "src")) {
		t.Fatalf("go.work:\n%s", work)
	}
	ov, _ := os.ReadFile(res.Overlay)
	if !strings.Contains(string(ov), filepath.Join(mainDir, "runtime", "gvisorpatches_gen.go")) {
		t.Fatalf("overlay: %s", ov)
	}
	if res2, err := Build(cfg, s); err != nil || len(res2.Rewritten) != 0 {
		t.Fatalf("a second Build rewrote %v (%v)", res2.Rewritten, err)
	}

	// Tampered, stray, missing.
	os.WriteFile(patched, []byte("package x\nfunc evil() {}\n"), 0o600)
	stray := filepath.Join(res.Tree, "src", "x", "stray.go")
	os.WriteFile(stray, []byte("package x\nfunc init() { panic(1) }\n"), 0o600)
	os.Remove(filepath.Join(res.Tree, "src", "go.mod"))
	gen := filepath.Join(res.Dir, "gvisorpatches_gen.go")
	os.WriteFile(gen, []byte("package runtime\n"), 0o600)
	res3, err := Build(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(patched); !strings.Contains(string(b), "return 3") {
		t.Fatalf("tampered output not rebuilt: %s (rewrote %v)", b, res3.Rewritten)
	}
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Fatalf("stray file kept: %v", err)
	}
	if _, err := os.Stat(filepath.Join(res.Tree, "src", "go.mod")); err != nil {
		t.Fatalf("missing file not restored: %v", err)
	}
	if b, _ := os.ReadFile(gen); !strings.Contains(string(b), "gvxpatches.Applied") {
		t.Fatalf("tampered gen file not rebuilt: %s", b)
	}

	// Others may write the cache: refused, naming the path and the fix.
	os.Chmod(res.Tree, 0o777)
	if _, err := Build(cfg, s); err == nil || !strings.Contains(err.Error(), res.Tree) || !strings.Contains(err.Error(), "others may write") {
		t.Fatalf("a world-writable tree: got %v", err)
	}
	os.Chmod(res.Tree, 0o700)
	if os.Geteuid() == 0 {
		os.Chown(res.Dir, 65534, 65534)
		if _, err := Build(cfg, s); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
			t.Fatalf("a workspace dir of another user: got %v", err)
		}
		os.Chown(res.Dir, 0, 0)
	}
	os.Chmod(cache, 0o777)
	if _, err := Build(cfg, s); err == nil || !strings.Contains(err.Error(), "others may write") {
		t.Fatalf("a world-writable cache root: got %v", err)
	}
}

// TestSeriesApplies: every patch of patches/gvisor applies to go.mod's
// gVisor, and each says what it enables and lacks.
func TestSeriesApplies(t *testing.T) {
	s, err := gvisorseries.Series()
	if err != nil {
		t.Fatal(err)
	}
	if len(s) == 0 {
		t.Fatal("no patch in patches/gvisor")
	}
	c := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "gvisor.dev/gvisor")
	c.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := c.Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Skipf("gVisor's module is not in the module cache (go mod download gvisor.dev/gvisor): %v", err)
	}
	outs, err := Apply(strings.TrimSpace(string(out)), s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(outs["pkg/sentry/kernel/task_signals.go"]), "func (t *Task) pidnsInitIgnoresLocked(") {
		t.Fatal("0001-pidns-init-signals: the patched task_signals.go has no pidnsInitIgnoresLocked")
	}
}

// TestOverlayNeedsWorkspace: a build that has the overlay (GOFLAGS) but not
// the go.work that puts the patched gVisor in place (GOWORK=off) fails on
// the marker package instead of giving a binary of upstream gVisor that
// rungv info calls patched; with both, the runtime package loads. Runs
// where the environment is cmd/gvisorpatch's (scripts/test.sh sets it).
func TestOverlayNeedsWorkspace(t *testing.T) {
	work, flags := os.Getenv("GOWORK"), os.Getenv("GOFLAGS")
	if !strings.Contains(flags, "-overlay=") || filepath.Base(work) != "go.work" {
		t.Skip(`not in cmd/gvisorpatch's environment: eval "$(go run ./cmd/gvisorpatch env)" first (scripts/test.sh does)`)
	}
	list := func(gowork string) string {
		c := exec.Command("go", "list", "-e", "-deps", "-f", "{{if .Error}}{{.ImportPath}}: {{.Error}}{{end}}", "z.gfire.dev/gvx/runtime")
		c.Env = append(os.Environ(), "GOWORK="+gowork)
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("go list (GOWORK=%s): %v\n%s", gowork, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if out := list(work); out != "" {
		t.Errorf("with the go.work: %s", out)
	}
	if out := list("off"); !strings.Contains(out, "gvisor.dev/gvisor/"+MarkerPkg) {
		t.Errorf("the overlay without the go.work: want an error naming %s, got %q", MarkerPkg, out)
	}
}
