package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// guestProgram builds the static guest program ./testdata/name into a
// private directory and returns its path.
func guestProgram(t *testing.T, name string) string {
	t.Helper()
	out := filepath.Join(privateTmp(t, asRoot), name)
	build := exec.Command("go", "build", "-o", out, "./testdata/"+name)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", name, err, b)
	}
	return out
}

// guestProgramBytes is guestProgram's binary, for a guest's stdin.
func guestProgramBytes(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(guestProgram(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
