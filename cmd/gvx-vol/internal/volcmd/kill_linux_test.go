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

// buildGvxVol builds the gvx-vol binary.
func buildGvxVol(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "gvx-vol")
	cmd := exec.Command("go", "build", "-o", dir+"/", "z.gfire.dev/gvx/cmd/gvx-vol")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// needStrace skips unless strace can trace here and e2fsck and go exist.
func needStrace(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"strace", "e2fsck", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	if out, err := exec.Command("strace", "-o", "/dev/null", "true").CombinedOutput(); err != nil {
		t.Skipf("strace cannot trace here (ptrace not allowed?): %v\n%s", err, out)
	}
}

// killContent is file i's content in writeKillTar's archive.
func killContent(i int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("<%d>", i)), 100*(i%37)+1) }

// writeKillTar writes a tar of 3000 files (enough for ext4lite to flush on
// its own mid-run), content derived from the name, to path.
func writeKillTar(t *testing.T, path string) {
	t.Helper()
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for i := range files {
		c := killContent(i)
		tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("d%d/f%03d", i%7, i), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(c))})
		tw.Write(c)
	}
	tw.Close()
	if err := os.WriteFile(path, tb.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// tracedWrites counts the pwrite64 calls of one full run of bin args.
func tracedWrites(t *testing.T, dir, bin string, args ...string) int {
	t.Helper()
	log := filepath.Join(dir, "strace.log")
	if out, err := exec.Command("strace", append([]string{"-f", "-e", "trace=pwrite64", "-o", log, bin}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("traced %v: %v\n%s", args, err, out)
	}
	raw, _ := os.ReadFile(log)
	total := strings.Count(string(raw), "pwrite64(")
	if total < 10 {
		t.Fatalf("only %d pwrite64 calls traced", total)
	}
	return total
}

// killAt runs bin args under strace, killed at its nth pwrite64.
func killAt(t *testing.T, n, total int, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command("strace", append([]string{"-f", "-o", "/dev/null", "-e", fmt.Sprintf("inject=pwrite64:error=EIO:signal=KILL:when=%d", n), bin}, args...)...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err == nil || !errors.As(err, &ee) {
		t.Fatalf("write %d of %d: %v was not killed: %v\n%s", n, total, args, err, out)
	}
}

// killPoints spreads the writes to kill at over a run of total writes: 12
// of them (4 with -short).
func killPoints(total int) []int {
	points := 12
	if testing.Short() {
		points = 4
	}
	var ns []int
	for k := 1; k <= points; k++ {
		ns = append(ns, k*total/(points+1))
	}
	return ns
}

// TestKillImportMidRun kills a real `gvx-vol import` at its Nth write
// (strace injects EIO and SIGKILL into pwrite64) for N spread over the
// whole run, then opens the volume: the journal replays, the own check and
// e2fsck are clean, and every file there has exactly its content.
func TestKillImportMidRun(t *testing.T) {
	needStrace(t)
	bin := buildGvxVol(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "in.tar")
	writeKillTar(t, src)
	golden := filepath.Join(dir, "golden.ext4")
	if out, err := exec.Command(bin, "create", "--size", "64M", golden).CombinedOutput(); err != nil {
		t.Fatalf("create: %v\n%s", err, out)
	}
	goldenBytes, _ := os.ReadFile(golden)

	// How many pwrite64 calls a full import makes.
	vol := filepath.Join(dir, "v.ext4")
	os.WriteFile(vol, goldenBytes, 0o644)
	total := tracedWrites(t, dir, bin, "import", vol, src)
	for _, n := range killPoints(total) {
		os.WriteFile(vol, goldenBytes, 0o644)
		killAt(t, n, total, bin, "import", vol, src)
		checkKilled(t, vol, n, total, killContent)
	}
}

// TestKillCreateFromMidRun kills a real `gvx-vol create --from TAR` (a
// bulk load without journal commits, published by rename) at its Nth
// write for N spread over the whole run: FILE never exists, and what is
// left beside it is no volume (ext4lite: not ext4; e2fsck -fn refuses
// it). A full run leaves FILE clean (e2fsck -fn) with every file.
func TestKillCreateFromMidRun(t *testing.T) {
	needStrace(t)
	bin := buildGvxVol(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "in.tar")
	writeKillTar(t, src)
	work := filepath.Join(dir, "w")
	vol := filepath.Join(work, "v.ext4")
	os.Mkdir(work, 0o755)
	total := tracedWrites(t, dir, bin, "create", "--size", "64M", "--from", src, vol)
	checkKilled(t, vol, total, total, killContent)
	for _, n := range killPoints(total) {
		os.RemoveAll(work)
		os.Mkdir(work, 0o755)
		killAt(t, n, total, bin, "create", "--size", "64M", "--from", src, vol)
		if _, err := os.Lstat(vol); err == nil {
			t.Fatalf("kill at write %d of %d: %s exists", n, total, vol)
		}
		left, _ := filepath.Glob(filepath.Join(work, ".v.ext4.tmp-*"))
		if len(left) != 1 {
			t.Fatalf("kill at write %d of %d: left %v, want one temporary file", n, total, left)
		}
		if _, err := ext4lite.Open(left[0], &ext4lite.Options{ReadOnly: true}); !errors.Is(err, ext4lite.ErrNotExt4) {
			t.Fatalf("kill at write %d of %d: opening the leftover %s: %v, want ErrNotExt4", n, total, left[0], err)
		}
		if out, err := exec.Command("e2fsck", "-fn", left[0]).CombinedOutput(); err == nil {
			t.Fatalf("kill at write %d of %d: e2fsck -fn passes the leftover\n%s", n, total, out)
		}
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
	for i := range files {
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
