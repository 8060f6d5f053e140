package main

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The three installations the tests run: the gvx-vol binary with its
// helper beside it (what users get); the gvx-vol binary alone (so a
// command line that still works there was run by the fast path, not by
// the helper); and the full CLI alone under the name gvx-vol (the
// reference: every verb through urfave/cli, as gvx-vol was before the
// split).
var (
	buildOnce                   sync.Once
	buildErr                    error
	withHelper, alone, fullOnly string
)

func binaries(t *testing.T) (withHelper, alone, fullOnly string) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go not installed")
	}
	buildOnce.Do(build)
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return withHelperDir(), aloneDir(), fullOnlyDir()
}

var binRoot string

func volume() string        { return filepath.Join(binRoot, "v.ext4") }
func withHelperDir() string { return filepath.Join(binRoot, "both", "gvx-vol") }
func aloneDir() string      { return filepath.Join(binRoot, "alone", "gvx-vol") }
func fullOnlyDir() string   { return filepath.Join(binRoot, "full", "gvx-vol") }

func build() {
	binRoot, buildErr = os.MkdirTemp("", "gvx-vol-split-test-")
	if buildErr != nil {
		return
	}
	both := filepath.Join(binRoot, "both") + string(filepath.Separator)
	cmd := exec.Command("go", "build", "-o", both, "z.gfire.dev/gvx/cmd/gvx-vol", "z.gfire.dev/gvx/cmd/gvx-vol/gvx-vol-tools")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		return
	}
	// A volume for the read-only verbs, shared by every run (by a symlink).
	tree := filepath.Join(binRoot, "tree")
	os.MkdirAll(filepath.Join(tree, "etc"), 0o755)
	os.WriteFile(filepath.Join(tree, "etc", "hostname"), []byte("episode\n"), 0o644)
	os.Symlink("etc/hostname", filepath.Join(tree, "link"))
	cmd = exec.Command(filepath.Join(both, "gvx-vol-tools"), "create", "--size", "32M", "--label", "fixture", "--from", tree, volume())
	if out, err := cmd.CombinedOutput(); err != nil {
		buildErr = fmt.Errorf("gvx-vol-tools create: %v\n%s", err, out)
		return
	}
	for _, cp := range [][2]string{
		{filepath.Join(both, "gvx-vol"), aloneDir()},
		{filepath.Join(both, "gvx-vol-tools"), fullOnlyDir()},
	} {
		data, err := os.ReadFile(cp[0])
		if err == nil {
			err = os.MkdirAll(filepath.Dir(cp[1]), 0o755)
		}
		if err == nil {
			err = os.WriteFile(cp[1], data, 0o755)
		}
		if err != nil {
			buildErr = err
			return
		}
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binRoot != "" {
		os.RemoveAll(binRoot)
	}
	os.Exit(code)
}

// result is what a run shows: output, status and the files it left.
type result struct {
	stdout, stderr string
	code           int
	files          string
}

// latency numbers differ from run to run; everything else must not.
// Nor do the random parts of temporary names.
var (
	latency  = regexp.MustCompile(`(in )[0-9.]+( ms)|("(latency_ns|latency_ms|total_ms)": )[0-9.e+-]+`)
	tempName = regexp.MustCompile(`(\.reflink(-probe)?-)[0-9a-f]+`)
)

func normalise(s string) string {
	return tempName.ReplaceAllString(latency.ReplaceAllString(s, "${1}${3}N${2}"), "${1}X")
}

// run runs bin with args in a fresh copy of the fixture directory: a
// golden file g (a hole, then data), an existing file taken, a directory
// sub, and v.ext4, a symlink to the shared volume (the read-only verbs'
// fixture; TestSplitSameCLI checks it is unchanged at the end).
func run(t *testing.T, bin string, args []string) result {
	t.Helper()
	dir := t.TempDir()
	g := append(make([]byte, 0), bytes.Repeat([]byte("golden volume! "), 5000)...)
	f, err := os.Create(filepath.Join(dir, "g"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(g, 1<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	os.WriteFile(filepath.Join(dir, "taken"), []byte("mine"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.Symlink(volume(), filepath.Join(dir, "v.ext4"))

	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %q: %v", bin, args, err)
	}
	var files []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			files = append(files, rel+"/")
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			files = append(files, rel+" -> "+target)
			return nil
		}
		data, _ := os.ReadFile(p)
		files = append(files, fmt.Sprintf("%s %x", rel, sha256.Sum256(data)))
		return nil
	})
	sort.Strings(files)
	return result{normalise(out.String()), normalise(errb.String()), code, strings.Join(files, "\n")}
}

func diff(t *testing.T, what string, args []string, got, want result) {
	t.Helper()
	if got != want {
		t.Errorf("gvx-vol %s (%s):\n got  exit %d, stdout %q, stderr %q, files\n%s\n want exit %d, stdout %q, stderr %q, files\n%s",
			strings.Join(args, " "), what, got.code, got.stdout, got.stderr, got.files, want.code, want.stdout, want.stderr, want.files)
	}
}

// TestSplitSameCLI: every command line gives the same output, exit status
// and files through the split binaries as through the full CLI alone, and
// the ones the fast path claims (fast) still work with no helper there,
// so the fast path's own flag parsing and messages match urfave/cli's:
// errors, --no-sync, counts, JSON, probes, usage errors; info and ls.
func TestSplitSameCLI(t *testing.T) {
	split, alone, full := binaries(t)
	before := hashFile(t, volume())
	for _, tc := range []struct {
		fast bool
		args []string
	}{
		{true, []string{"clone", "--reflink=never", "g", "ep"}},
		{true, []string{"clone", "-q", "--reflink=never", "--no-sync", "g", "ep"}},
		{true, []string{"clone", "--no-sync=true", "-reflink", "never", "g", "ep"}},
		{true, []string{"clone", "--reflink=auto", "--json", "g", "ep"}},
		{true, []string{"clone", "--reflink=never", "-n", "3", "--start", "8", "g", "ep-%04d"}},
		{true, []string{"clone", "--reflink=never", "--count=0x2", "--json", "g", "ep-%-3d.x"}},
		{true, []string{"clone", "--reflink=never", "g", "ep%%x"}},
		{true, []string{"clone", "--reflink=never", "g", "sub"}},
		{true, []string{"clone", "--reflink=never", "--", "g", "ep"}},
		{true, []string{"clone", "g", "ep"}}, // always: a clone, or (tmpfs, ext4) the refusal
		{true, []string{"clone", "--reflink=never", "g", "taken"}},
		{true, []string{"clone", "--reflink=never", "-f", "g", "taken"}},
		{true, []string{"clone", "--reflink=never", "--force=false", "g", "taken"}},
		{true, []string{"clone", "--reflink=never", "-n", "2", "g", "ep-%d-x"}},
		{true, []string{"clone", "--reflink=never", "-n", "3", "--start", "0", "g", "ep-%d"}},
		{true, []string{"clone", "--reflink=never", "-n", "2", "g", "taken%d"}},
		{true, []string{"clone", "--reflink=never", "nosuch", "ep"}},
		{true, []string{"clone", "--reflink=never", "g", "nodir/ep"}},
		{true, []string{"clone", "--reflink=never", "--json", "nosuch", "ep"}},
		{true, []string{"clone"}},
		{true, []string{"clone", "g"}},
		{true, []string{"clone", "g", "a", "b"}},
		{true, []string{"clone", "--reflink=sometimes", "g", "x"}},
		{true, []string{"clone", "g", "ep-%04d"}},
		{true, []string{"clone", "--count", "2", "g", "ep"}},
		{true, []string{"clone", "--count", "2", "g", "ep-%d-%d"}},
		{true, []string{"clone", "--count", "2", "g", "ep-%s"}},
		{true, []string{"clone", "--count", "2", "g", "ep-%5-d"}},
		{true, []string{"clone", "--count", "0", "g", "ep-%d"}},
		{true, []string{"clone", "--count", "-1", "g", "ep-%d"}},
		{true, []string{"clone", "--count", "1000000000000", "g", "ep-%d"}},
		{true, []string{"clone", "-n", "1", "--start", "-3", "g", "ep-%d"}},
		{true, []string{"clone", "--start", "2", "g", "ep"}},
		{true, []string{"clone", "--probe"}},
		{true, []string{"clone", "--probe", ".", "sub"}},
		{true, []string{"clone", "--probe", "--json", ".", "nosuch"}},
		{true, []string{"clone", "--probe", "-q", "nosuch"}},
		{true, []string{"info", "v.ext4"}},
		{true, []string{"info", "--json", "v.ext4"}},
		{true, []string{"info", "-json=false", "v.ext4"}},
		{true, []string{"info"}},
		{true, []string{"info", "v.ext4", "g"}},
		{true, []string{"info", "nosuch"}},
		{true, []string{"info", "g"}},
		{true, []string{"ls", "v.ext4"}},
		{true, []string{"ls", "-l", "v.ext4"}},
		{true, []string{"ls", "--l", "-l", "v.ext4", "/etc"}},
		{true, []string{"ls", "--json", "v.ext4", "/"}},
		{true, []string{"ls", "-l", "--json", "v.ext4", "etc/hostname"}},
		{true, []string{"ls", "-l", "v.ext4", "/link"}},
		{true, []string{"ls", "v.ext4", "/nosuch"}},
		{true, []string{"ls", "v.ext4", "/link/x"}},
		{true, []string{"ls", "v.ext4", "../etc"}},
		{true, []string{"ls"}},
		{true, []string{"ls", "v.ext4", "/", "/etc"}},
		{true, []string{"ls", "g"}},
		{true, []string{"ls", "nosuch"}},

		{false, []string{"clone", "--help"}},
		{false, []string{"clone", "-h"}},
		{false, []string{"clone", "-help"}},
		{false, []string{"clone", "--help=false", "--reflink=never", "g", "ep"}},
		{false, []string{"clone", "g", "ep", "--help"}},
		{false, []string{"clone", "g", "ep", "--no-sync"}},
		{false, []string{"clone", "--bogus", "g", "ep"}},
		{false, []string{"clone", "--count", "x", "g", "ep-%d"}},
		{false, []string{"clone", "--count"}},
		{false, []string{"clone", "--json=maybe", "g", "ep"}},
		{false, []string{"clone", "-f", "--force", "--reflink=never", "g", "taken"}},
		{false, []string{"clone", "-n", "2", "--count", "2", "g", "ep-%d"}},
		{false, []string{"clone", "--generate-bash-completion"}},
		{false, []string{"--help"}},
		{false, []string{"-h"}},
		{false, []string{"--version"}},
		{false, []string{}},
		{false, []string{"nosuchverb"}},
		{false, []string{"Clone", "g", "ep"}},
		{false, []string{"--generate-bash-completion"}},
		{false, []string{"info", "--help"}},
		{false, []string{"ls", "-h"}},
		{false, []string{"ls", "v.ext4", "-l"}},
		{false, []string{"info", "--bogus", "v.ext4"}},
		{false, []string{"ls", "--json=yes", "v.ext4"}},
		{false, []string{"erofs", "--help"}},
		{false, []string{"create"}},
		{false, []string{"cat", "g", "/etc/hostname"}},
	} {
		want := run(t, full, tc.args)
		diff(t, "with its helper", tc.args, run(t, split, tc.args), want)
		got := run(t, alone, tc.args)
		if tc.fast {
			diff(t, "fast path, no helper", tc.args, got, want)
			continue
		}
		helperPath := filepath.Join(filepath.Dir(alone), "gvx-vol-tools")
		if runtime.GOOS == "windows" {
			helperPath += ".exe"
		}
		if got.code != 1 || !strings.Contains(got.stderr, helperPath) || !strings.Contains(got.stderr, "go build -o") || got.stdout != "" {
			t.Errorf("gvx-vol %s without its helper: exit %d, stdout %q, stderr %q; want exit 1 and an error naming %s and how to build it",
				strings.Join(tc.args, " "), got.code, got.stdout, got.stderr, helperPath)
		}
	}
	// The comparisons above would pass if both sides failed alike: the
	// fast path does work.
	for _, ok := range []struct {
		args []string
		want string
	}{
		{[]string{"info", "v.ext4"}, "label:       fixture"},
		{[]string{"ls", "-l", "v.ext4", "/etc"}, " hostname\n"},
		{[]string{"ls", "v.ext4"}, "link\n"},
		{[]string{"clone", "--reflink=never", "g", "ep"}, "ep: sparse copy"},
	} {
		got := run(t, alone, ok.args)
		if got.code != 0 || !strings.Contains(got.stdout, ok.want) {
			t.Errorf("gvx-vol %s (fast path): exit %d, stdout %q, stderr %q; want %q", strings.Join(ok.args, " "), got.code, got.stdout, got.stderr, ok.want)
		}
	}
	if hashFile(t, volume()) != before {
		t.Errorf("the read-only verbs changed %s", volume())
	}
}

func hashFile(t *testing.T, path string) [32]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(data)
}

// TestHelpListsEveryVerb: gvx-vol --help (answered by the helper) lists
// every verb, clone included.
func TestHelpListsEveryVerb(t *testing.T) {
	split, _, _ := binaries(t)
	out, err := exec.Command(split, "--help").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"create", "import", "export", "ls", "cat", "info", "fsck", "compact", "clone", "erofs", "image", "build-golden"} {
		if !regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(verb) + `\b`).MatchString(string(out)) {
			t.Errorf("gvx-vol --help does not list %s:\n%s", verb, out)
		}
	}
}

// TestFastPathLinksLittle: the gvx-vol binary links none of the packages
// whose initialisation made a clone slow (docs/gvx-vol.md, "Start-up"),
// nor gVisor (goldencmd's TestNoGVisor checks gvx-vol-tools for that);
// and what it links for info and ls does not build its CRC-32C tables
// (9 KiB, the largest single cost of a start under perf) before main.
func TestFastPathLinksLittle(t *testing.T) {
	_, alone, _ := binaries(t)
	cmd := exec.Command("go", "list", "-deps", "z.gfire.dev/gvx/cmd/gvx-vol")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		for _, heavy := range []string{"github.com/urfave/", "github.com/russross/", "github.com/google/go-containerregistry",
			"github.com/klauspost/", "github.com/opencontainers/", "net/http", "regexp", "z.gfire.dev/gvx/erofs",
			"z.gfire.dev/gvx/image", "z.gfire.dev/gvx/golden", "gvisor.dev/", "z.gfire.dev/gvx/runtime"} {
			if strings.HasPrefix(p, heavy) {
				t.Errorf("gvx-vol links %s (%s): only gvx-vol-tools may", p, heavy)
			}
		}
	}

	// "init PKG @T ms, C ms clock, B bytes, A allocs"
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "g"), []byte("golden"), 0o644)
	cmd = exec.Command(alone, "clone", "-q", "--reflink=never", filepath.Join(dir, "g"), filepath.Join(dir, "ep"))
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	trace, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gvx-vol clone: %v\n%s", err, trace)
	}
	line := regexp.MustCompile(`(?m)^init (\S+) @.* ms clock, (\d+) bytes`)
	inits := line.FindAllStringSubmatch(string(trace), -1)
	if len(inits) == 0 {
		t.Fatalf("GODEBUG=inittrace=1 printed no init lines:\n%s", trace)
	}
	for _, m := range inits {
		if n, _ := strconv.Atoi(m[2]); (strings.Contains(m[1], "/ext4lite") || strings.Contains(m[1], "/jbd2")) && n >= 8<<10 {
			t.Errorf("package %s allocates %s bytes at initialisation (a CRC-32C table is 9 KiB: build it on first use)", m[1], m[2])
		}
	}
}

// TestErrorsCannotDriveTheTerminal: an error that names what a guest made
// (here a name with an OSC sequence and a carriage return, as a volume's
// file could be called) reaches the terminal escaped, from the fast path
// (ls) and from the full CLI (fsck), while the messages' own newlines
// stay.
func TestErrorsCannotDriveTheTerminal(t *testing.T) {
	split, _, _ := binaries(t)
	evil := "x\x1b]0;pwned\x07\rforged"
	for _, args := range [][]string{{"ls", "v.ext4", "/" + evil}, {"fsck", evil + ".ext4"}} {
		r := run(t, split, args)
		if r.code == 0 {
			t.Fatalf("%q: succeeded", args)
		}
		if strings.ContainsAny(r.stderr, "\x1b\x07\r") {
			t.Errorf("%q: raw control characters on stderr: %q", args, r.stderr)
		}
		if !strings.Contains(r.stderr, `x\x1b]0;pwned\a\rforged`) {
			t.Errorf("%q: stderr does not show the name escaped: %q", args, r.stderr)
		}
	}
}
