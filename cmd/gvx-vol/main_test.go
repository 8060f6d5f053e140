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
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The gvx-vol binary the tests run, built once, alone in its directory,
// and a volume for the read-only verbs.
var (
	buildOnce sync.Once
	buildErr  error
	binRoot   string
)

func binary(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go not installed")
	}
	buildOnce.Do(build)
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath()
}

func volume() string  { return filepath.Join(binRoot, "v.ext4") }
func binPath() string { return filepath.Join(binRoot, "bin", "gvx-vol") }

func build() {
	binRoot, buildErr = os.MkdirTemp("", "gvx-vol-test-")
	if buildErr != nil {
		return
	}
	cmd := exec.Command("go", "build", "-o", binPath(), "z.gfire.dev/gvx/cmd/gvx-vol")
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
	cmd = exec.Command(binPath(), "create", "--size", "32M", "--label", "fixture", "--from", tree, volume())
	if out, err := cmd.CombinedOutput(); err != nil {
		buildErr = fmt.Errorf("gvx-vol create: %v\n%s", err, out)
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
	tempName = regexp.MustCompile(`(\.reflink(-probe)?-|\.tmp-)[0-9a-f]+`)
)

// The version names the build's revision.
var version = regexp.MustCompile(`(?m)^(gvx-vol ).*(, go1)`)

func normalise(s string) string {
	s = version.ReplaceAllString(s, "${1}V${2}")
	return tempName.ReplaceAllString(latency.ReplaceAllString(s, "${1}${3}N${2}"), "${1}X")
}

// run runs bin with args in a fresh copy of the fixture directory: a
// golden file g (a hole, then data), an existing file taken, a directory
// sub, and v.ext4, a symlink to the shared volume (the read-only verbs'
// fixture; TestCLI checks it is unchanged at the end).
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

// TestCLI runs gvx-vol's command lines (every form of clone, info and ls,
// the usage errors urfave/cli reports, help, completion, other verbs) and
// checks each one's exit status; the runs that succeed or fail by design
// are then checked for what they print and leave. With
// GVX_VOL_REFERENCE=PATH (a gvx-vol binary built from another revision) it
// compares every run's output, exit status and files with that binary's,
// byte for byte: how the one binary was checked against the full CLI of
// the two-binary gvx-vol it replaced.
func TestCLI(t *testing.T) {
	const anyCode = -1 // the filesystem decides
	bin := binary(t)
	ref := os.Getenv("GVX_VOL_REFERENCE")
	before := hashFile(t, volume())
	for _, tc := range []struct {
		code int
		args []string
	}{
		{0, []string{"clone", "--reflink=never", "g", "ep"}},
		{0, []string{"clone", "-q", "--reflink=never", "--no-sync", "g", "ep"}},
		{0, []string{"clone", "--no-sync=true", "-reflink", "never", "g", "ep"}},
		{0, []string{"clone", "--reflink=auto", "--json", "g", "ep"}},
		{0, []string{"clone", "--reflink=never", "-n", "3", "--start", "8", "g", "ep-%04d"}},
		{0, []string{"clone", "--reflink=never", "--count=0x2", "--json", "g", "ep-%-3d.x"}},
		{0, []string{"clone", "--reflink=never", "g", "ep%%x"}},
		{0, []string{"clone", "--reflink=never", "g", "sub"}},
		{0, []string{"clone", "--reflink=never", "--", "g", "ep"}},
		{anyCode, []string{"clone", "g", "ep"}}, // always: a clone, or (tmpfs, ext4) the refusal
		{1, []string{"clone", "--reflink=never", "g", "taken"}},
		{0, []string{"clone", "--reflink=never", "-f", "g", "taken"}},
		{1, []string{"clone", "--reflink=never", "--force=false", "g", "taken"}},
		{0, []string{"clone", "--reflink=never", "-n", "2", "g", "ep-%d-x"}},
		{0, []string{"clone", "--reflink=never", "-n", "3", "--start", "0", "g", "ep-%d"}},
		{0, []string{"clone", "--reflink=never", "-n", "2", "g", "taken%d"}},
		{1, []string{"clone", "--reflink=never", "nosuch", "ep"}},
		{1, []string{"clone", "--reflink=never", "g", "nodir/ep"}},
		{1, []string{"clone", "--reflink=never", "--json", "nosuch", "ep"}},
		{2, []string{"clone"}},
		{2, []string{"clone", "g"}},
		{2, []string{"clone", "g", "a", "b"}},
		{2, []string{"clone", "--reflink=sometimes", "g", "x"}},
		{2, []string{"clone", "g", "ep-%04d"}},
		{2, []string{"clone", "--count", "2", "g", "ep"}},
		{2, []string{"clone", "--count", "2", "g", "ep-%d-%d"}},
		{2, []string{"clone", "--count", "2", "g", "ep-%s"}},
		{2, []string{"clone", "--count", "2", "g", "ep-%5-d"}},
		{2, []string{"clone", "--count", "0", "g", "ep-%d"}},
		{2, []string{"clone", "--count", "-1", "g", "ep-%d"}},
		{2, []string{"clone", "--count", "1000000000000", "g", "ep-%d"}},
		{2, []string{"clone", "-n", "1", "--start", "-3", "g", "ep-%d"}},
		{2, []string{"clone", "--start", "2", "g", "ep"}},
		{2, []string{"clone", "--probe"}},
		{1, []string{"clone", "--probe", ".", "sub"}},
		{1, []string{"clone", "--probe", "--json", ".", "nosuch"}},
		{1, []string{"clone", "--probe", "-q", "nosuch"}},
		{0, []string{"info", "v.ext4"}},
		{0, []string{"info", "--json", "v.ext4"}},
		{0, []string{"info", "-json=false", "v.ext4"}},
		{2, []string{"info"}},
		{2, []string{"info", "v.ext4", "g"}},
		{1, []string{"info", "nosuch"}},
		{1, []string{"info", "g"}},
		{0, []string{"ls", "v.ext4"}},
		{0, []string{"ls", "-l", "v.ext4"}},
		{0, []string{"ls", "--l", "-l", "v.ext4", "/etc"}},
		{0, []string{"ls", "--json", "v.ext4", "/"}},
		{0, []string{"ls", "-l", "--json", "v.ext4", "etc/hostname"}},
		{0, []string{"ls", "-l", "v.ext4", "/link"}},
		{1, []string{"ls", "v.ext4", "/nosuch"}},
		{1, []string{"ls", "v.ext4", "/link/x"}},
		{0, []string{"ls", "v.ext4", "../etc"}},
		{2, []string{"ls"}},
		{2, []string{"ls", "v.ext4", "/", "/etc"}},
		{1, []string{"ls", "g"}},
		{1, []string{"ls", "nosuch"}},
		{0, []string{"clone", "--help"}},
		{0, []string{"clone", "-h"}},
		{0, []string{"clone", "-help"}},
		{0, []string{"clone", "--help=false", "--reflink=never", "g", "ep"}},
		{2, []string{"clone", "g", "ep", "--help"}},
		{2, []string{"clone", "g", "ep", "--no-sync"}},
		{2, []string{"clone", "--bogus", "g", "ep"}},
		{2, []string{"clone", "--count", "x", "g", "ep-%d"}},
		{2, []string{"clone", "--count"}},
		{2, []string{"clone", "--json=maybe", "g", "ep"}},
		{2, []string{"clone", "-f", "--force", "--reflink=never", "g", "taken"}},
		{2, []string{"clone", "-n", "2", "--count", "2", "g", "ep-%d"}},
		{0, []string{"clone", "--generate-bash-completion"}},
		{0, []string{"--help"}},
		{0, []string{"-h"}},
		{0, []string{"--version"}},
		{0, []string{}},
		{2, []string{"nosuchverb"}},
		{2, []string{"Clone", "g", "ep"}},
		{0, []string{"--generate-bash-completion"}},
		{0, []string{"info", "--help"}},
		{0, []string{"ls", "-h"}},
		{1, []string{"ls", "v.ext4", "-l"}},
		{2, []string{"info", "--bogus", "v.ext4"}},
		{2, []string{"ls", "--json=yes", "v.ext4"}},
		{0, []string{"erofs", "--help"}},
		{2, []string{"create"}},
		{1, []string{"cat", "g", "/etc/hostname"}},
	} {
		got := run(t, bin, tc.args)
		if tc.code != anyCode && got.code != tc.code {
			t.Errorf("gvx-vol %s: exit %d, want %d\nstdout %q\nstderr %q", strings.Join(tc.args, " "), got.code, tc.code, got.stdout, got.stderr)
		}
		if ref != "" {
			diff(t, "against "+ref, tc.args, got, run(t, ref, tc.args))
		}
	}
	// The exit statuses above would pass if every verb failed alike: the
	// verbs do work.
	for _, ok := range []struct {
		args []string
		want string
	}{
		{[]string{"info", "v.ext4"}, "label:       fixture"},
		{[]string{"ls", "-l", "v.ext4", "/etc"}, " hostname\n"},
		{[]string{"ls", "v.ext4"}, "link\n"},
		{[]string{"clone", "--reflink=never", "g", "ep"}, "ep: sparse copy"},
		{[]string{"clone", "--help"}, "--reflink WHEN"},
	} {
		got := run(t, bin, ok.args)
		if got.code != 0 || !strings.Contains(got.stdout, ok.want) {
			t.Errorf("gvx-vol %s: exit %d, stdout %q, stderr %q; want %q", strings.Join(ok.args, " "), got.code, got.stdout, got.stderr, ok.want)
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

// TestHelpListsEveryVerb: gvx-vol --help lists every verb.
func TestHelpListsEveryVerb(t *testing.T) {
	out, err := exec.Command(binary(t), "--help").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"create", "import", "export", "ls", "cat", "info", "fsck", "compact", "clone", "erofs", "image", "build-golden"} {
		if !regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(verb) + `\b`).MatchString(string(out)) {
			t.Errorf("gvx-vol --help does not list %s:\n%s", verb, out)
		}
	}
}

// TestOneBinary: `go build -o X ./cmd/gvx-vol` makes a gvx-vol that runs
// every verb by itself (issue 29): create and fsck, from a directory that
// holds nothing but X.
func TestOneBinary(t *testing.T) {
	bin := binary(t)
	ents, err := os.ReadDir(filepath.Dir(bin))
	if err != nil || len(ents) != 1 {
		t.Fatalf("%s holds %v (%v), want gvx-vol alone", filepath.Dir(bin), ents, err)
	}
	vol := filepath.Join(t.TempDir(), "v.ext4")
	for _, args := range [][]string{{"create", "--size", "1G", vol}, {"fsck", vol}, {"erofs", "--help"}, {"image", "ls", "--help"}} {
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("gvx-vol %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestLinks: no package of this module gvx-vol links allocates 8 KiB or
// more at initialisation (a CRC-32C table is 9 KiB; a regexp compiled at
// package level a few): every start pays for each package's init,
// clone's included, so such tables are built on first use. (That gvx-vol
// never links gVisor or the runtime is a row of internal/layers.)
func TestLinks(t *testing.T) {
	bin := binary(t)
	// "init PKG @T ms, C ms clock, B bytes, A allocs"
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "g"), []byte("golden"), 0o644)
	cmd := exec.Command(bin, "clone", "-q", "--reflink=never", filepath.Join(dir, "g"), filepath.Join(dir, "ep"))
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
		if n, _ := strconv.Atoi(m[2]); strings.HasPrefix(m[1], "z.gfire.dev/") && n >= 8<<10 {
			t.Errorf("package %s allocates %s bytes at initialisation: build its tables on first use", m[1], m[2])
		}
	}
}

// TestErrorsCannotDriveTheTerminal: an error that names what a guest made
// (here a name with an OSC sequence and a carriage return, as a volume's
// file could be called) reaches the terminal escaped, from ls and fsck,
// while the messages' own newlines stay.
func TestErrorsCannotDriveTheTerminal(t *testing.T) {
	bin := binary(t)
	evil := "x\x1b]0;pwned\x07\rforged"
	for _, args := range [][]string{{"ls", "v.ext4", "/" + evil}, {"fsck", evil + ".ext4"}} {
		r := run(t, bin, args)
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
