package clonecmd

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
)

// runCLI runs "gvx-vol ARGS..." in-process with only the clone verb, and
// returns its output and error.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	app := &cli.App{Name: "gvx-vol", Commands: []*cli.Command{Command()}, Writer: &out, ErrWriter: &out,
		ExitErrHandler: func(*cli.Context, error) {}}
	err := app.Run(append([]string{"gvx-vol"}, args...))
	return out.String(), err
}

func writeGolden(t *testing.T, path string) []byte {
	t.Helper()
	data := bytes.Repeat([]byte("golden volume! "), 10000)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, 1<<20); err != nil { // a 1 MiB hole first
		t.Fatal(err)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return want
}

func mustEqualFile(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the golden file", path)
	}
}

func TestHelpTeaches(t *testing.T) {
	out, err := runCLI(t, "clone", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Examples:", "--count 64", "ep-%04d.ext4", "--reflink=auto", "--probe", "reflink=1"} {
		if !strings.Contains(out, want) {
			t.Errorf("clone --help does not mention %q", want)
		}
	}
}

func TestCloneNeverAndCount(t *testing.T) {
	dir := t.TempDir()
	golden := filepath.Join(dir, "golden-docker.ext4")
	want := writeGolden(t, golden)

	out, err := runCLI(t, "clone", "--reflink=never", golden, filepath.Join(dir, "ep.ext4"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "sparse copy") {
		t.Errorf("output %q does not say it copied", out)
	}
	mustEqualFile(t, filepath.Join(dir, "ep.ext4"), want)

	// Into a directory: keeps SRC's name.
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	if _, err := runCLI(t, "clone", "-q", "--reflink=never", golden, sub); err != nil {
		t.Fatal(err)
	}
	mustEqualFile(t, filepath.Join(sub, "golden-docker.ext4"), want)

	out, err = runCLI(t, "clone", "--reflink=never", "--count", "3", "--start", "8", "--json", golden, filepath.Join(dir, "ep-%04d.ext4"))
	if err != nil {
		t.Fatal(err)
	}
	var res Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out)
	}
	if res.Mode != "never" || len(res.Clones) != 3 {
		t.Fatalf("--json: %+v", res)
	}
	for i, c := range res.Clones {
		wantDst := filepath.Join(dir, []string{"ep-0008.ext4", "ep-0009.ext4", "ep-0010.ext4"}[i])
		if c.Dst != wantDst || c.Method.String() != "copy" || c.Size != int64(len(want)) || c.LatencyNS <= 0 {
			t.Errorf("clone %d: %+v", i, c)
		}
		mustEqualFile(t, wantDst, want)
	}
	if !strings.Contains(out, `"method": "copy"`) {
		t.Errorf("--json does not spell the method: %s", out)
	}

	// Existing destinations are kept unless --force; the error says how.
	os.WriteFile(filepath.Join(dir, "ep-0009.ext4"), []byte("mine"), 0o644)
	_, err = runCLI(t, "clone", "--reflink=never", "--count", "3", "--start", "8", golden, filepath.Join(dir, "ep-%04d.ext4"))
	if err == nil || !strings.Contains(err.Error(), "--force") || cliutil.ExitCode(err) != 1 {
		t.Fatalf("over an existing file: %v (exit %d), want a hint at --force", err, cliutil.ExitCode(err))
	}
	mustEqualFile(t, filepath.Join(dir, "ep-0009.ext4"), []byte("mine"))
	if _, err := runCLI(t, "clone", "-q", "-f", "--reflink=never", "-n", "3", "--start", "8", golden, filepath.Join(dir, "ep-%04d.ext4")); err != nil {
		t.Fatal(err)
	}
	mustEqualFile(t, filepath.Join(dir, "ep-0009.ext4"), want)
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	golden := filepath.Join(dir, "g")
	writeGolden(t, golden)
	for _, args := range [][]string{
		{"clone", golden},
		{"clone", "--reflink=sometimes", golden, filepath.Join(dir, "x")},
		{"clone", golden, filepath.Join(dir, "ep-%04d")},
		{"clone", "--count", "2", golden, filepath.Join(dir, "ep")},
		{"clone", "--count", "2", golden, filepath.Join(dir, "ep-%d-%d")},
		{"clone", "--count", "2", golden, filepath.Join(dir, "ep-%s")},
		{"clone", "--count", "0", golden, filepath.Join(dir, "ep-%d")},
		{"clone", "--count", "1000000000000", golden, filepath.Join(dir, "ep-%d")},
		{"clone", "--start", "2", golden, filepath.Join(dir, "ep")},
		{"clone", "--probe"},
	} {
		_, err := runCLI(t, args...)
		if cliutil.ExitCode(err) != 2 {
			t.Errorf("%q: err %v (exit %d), want a usage error (exit 2)", args, err, cliutil.ExitCode(err))
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("usage errors left files behind: %v", ents)
	}
}
