package helper

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExecMissing: with no helper beside the running binary (a test
// binary has none), Exec returns an error naming the path it looked at
// and how to put the helper there, and does not replace the process.
func TestExecMissing(t *testing.T) {
	path, err := Path()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Skipf("%s exists beside the test binary", path)
	}
	exe, _ := os.Executable()
	exe, _ = filepath.EvalSymlinks(exe)
	if filepath.Dir(path) != filepath.Dir(exe) {
		t.Errorf("Path() = %s, want it beside %s", path, exe)
	}
	err = Exec([]string{"gvx-vol", "--help"})
	if err == nil {
		t.Fatal("Exec of a missing helper returned nil")
	}
	for _, want := range []string{path, "no such file", "go build -o", "./cmd/gvx-vol/...", "go install"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
