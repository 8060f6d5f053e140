package volcmd_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"z.gfire.dev/gvx/ext4lite"
)

const files = 3000

// buildGvxVol builds the gvx-vol binary, with gvx-vol-tools (which runs
// import) beside it.
func buildGvxVol(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "gvx-vol")
	cmd := exec.Command("go", "build", "-o", dir+"/", "z.gfire.dev/gvx/cmd/gvx-vol/...")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestKillImportMidRun kills a real `gvx-vol import` at its Nth write
// (strace injects EIO and SIGKILL into pwrite64) for N spread over the
// whole run, then opens the volume: the journal replays, the own check and
// e2fsck are clean, and every file there has exactly its content.
func TestKillImportMidRun(t *testing.T) {
	for _, tool := range []string{"strace", "e2fsck", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	if out, err := exec.Command("strace", "-o", "/dev/null", "true").CombinedOutput(); err != nil {
		t.Skipf("strace cannot trace here (ptrace not allowed?): %v\n%s", err, out)
	}
	bin := buildGvxVol(t)
	dir := t.TempDir()
	// A tar of 3000 files (enough for ext4lite to flush on its own mid-run), content derived from the name.
	content := func(i int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("<%d>", i)), 100*(i%37)+1) }
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for i := 0; i < files; i++ {
		c := content(i)
		tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("d%d/f%03d", i%7, i), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(c))})
		tw.Write(c)
	}
	tw.Close()
	src := filepath.Join(dir, "in.tar")
	os.WriteFile(src, tb.Bytes(), 0o644)
	golden := filepath.Join(dir, "golden.ext4")
	if out, err := exec.Command(bin, "create", "--size", "64M", golden).CombinedOutput(); err != nil {
		t.Fatalf("create: %v\n%s", err, out)
	}
	goldenBytes, _ := os.ReadFile(golden)

	// How many pwrite64 calls a full import makes.
	vol := filepath.Join(dir, "v.ext4")
	os.WriteFile(vol, goldenBytes, 0o644)
	log := filepath.Join(dir, "strace.log")
	if out, err := exec.Command("strace", "-f", "-e", "trace=pwrite64", "-o", log, bin, "import", vol, src).CombinedOutput(); err != nil {
		t.Fatalf("traced import: %v\n%s", err, out)
	}
	raw, _ := os.ReadFile(log)
	total := strings.Count(string(raw), "pwrite64(")
	if total < 10 {
		t.Fatalf("only %d pwrite64 calls traced", total)
	}
	points := 12
	if testing.Short() {
		points = 4
	}
	for k := 1; k <= points; k++ {
		n := k * total / (points + 1)
		os.WriteFile(vol, goldenBytes, 0o644)
		cmd := exec.Command("strace", "-f", "-o", "/dev/null", "-e", fmt.Sprintf("inject=pwrite64:error=EIO:signal=KILL:when=%d", n), bin, "import", vol, src)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err == nil || !errors.As(err, &ee) {
			t.Fatalf("write %d of %d: import was not killed: %v\n%s", n, total, err, out)
		}
		checkKilled(t, vol, n, total, content)
	}
}

func checkKilled(t *testing.T, vol string, n, total int, content func(int) []byte) {
	t.Helper()
	// gvx-vol fsck replays first: -n in memory (the file stays as it is),
	// then for real.
	f, _ := os.Open(vol)
	dirty, _ := ext4lite.NeedsRecovery(f)
	f.Close()
	if dirty {
		t.Logf("kill at write %d of %d left a journal to replay", n, total)
	}
	before, _ := os.ReadFile(vol)
	if out, code := run(t, "fsck", "-n", vol); code != 0 {
		t.Fatalf("kill at write %d of %d: fsck -n: exit %d\n%s", n, total, code, out)
	}
	if after, _ := os.ReadFile(vol); !bytes.Equal(before, after) {
		t.Fatalf("fsck -n wrote to the volume")
	}
	if out, code := run(t, "fsck", vol); code != 0 {
		t.Fatalf("kill at write %d of %d: fsck: exit %d\n%s", n, total, code, out)
	}
	v, err := ext4lite.Open(vol, nil)
	if err != nil {
		t.Fatalf("kill at write %d of %d: open: %v", n, total, err)
	}
	rep, err := v.Check(nil)
	if err != nil || len(rep.Findings) > 0 {
		t.Fatalf("kill at write %d of %d: check: %v %v", n, total, err, rep)
	}
	found := 0
	for i := 0; i < files; i++ {
		r, err := v.Open(fmt.Sprintf("d%d/f%03d", i%7, i))
		if err != nil {
			continue
		}
		got, _ := io.ReadAll(r)
		if !bytes.Equal(got, content(i)) {
			t.Fatalf("kill at write %d of %d: f%03d has %d bytes, want %d", n, total, i, len(got), len(content(i)))
		}
		found++
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("e2fsck", "-fn", vol).CombinedOutput()
	if err != nil {
		t.Fatalf("kill at write %d of %d: e2fsck -fn after replay: %v\n%s", n, total, err, out)
	}
	t.Logf("killed at write %d of %d: %d of %d files survived, all intact", n, total, found, files)
}
