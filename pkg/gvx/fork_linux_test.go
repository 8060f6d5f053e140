package gvx_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/pkg/gvx"
	"z.gfire.dev/gvx/spec"
)

// The guest of the checkpoint tests: a counter in the background (c1, c2,
// … on stdout, the last value in /data/count) and a shell that runs each
// line of stdin, so the test can drive a restored guest.
const counterScript = `echo boot > /data/boot.txt
(i=0; while :; do i=$((i+1)); echo $i > /data/count; echo c$i; sleep 0.05; done) &
while read -r l; do eval "$l"; done`

// counterSpec is a seccomp-only guest that prints c1, c2, … on stdout in
// the background and sleeps: what the restore tests save, with mounts.
func counterSpec(mounts ...spec.Mount) *spec.Spec {
	return &spec.Spec{
		Version: spec.Version, Image: imageRef, Network: spec.NetworkNone, Isolation: spec.IsolationSeccompOnly,
		Entrypoint: []string{"sh", "-c"},
		Args:       []string{`(i=0; while :; do i=$((i+1)); echo c$i; sleep 0.05; done) & exec sleep 100000`},
		Mounts:     mounts,
	}
}

// output is a guest's stdout, safe to read while it is written.
type output struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{}
}

func newOutput() *output { return &output{changed: make(chan struct{})} }

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.b.Write(p)
	close(o.changed)
	o.changed = make(chan struct{})
	return len(p), nil
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// waitFor waits until the output matches re and returns the match.
func (o *output) waitFor(t *testing.T, re string) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.After(60 * time.Second)
	for {
		o.mu.Lock()
		m := rx.FindStringSubmatch(o.b.String())
		ch := o.changed
		o.mu.Unlock()
		if m != nil {
			return m
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no %q in the guest's output within 60 s: %q", re, o.String())
		}
	}
}

// counters are the counter values in s, in order.
func counters(s string) []int {
	var n []int
	for _, m := range regexp.MustCompile(`(?m)^c(\d+)$`).FindAllStringSubmatch(s, -1) {
		v, _ := strconv.Atoi(m[1])
		n = append(n, v)
	}
	return n
}

// episode is a running sandbox the test drives through its stdin.
type episode struct {
	sb   *gvx.Sandbox
	in   *os.File
	out  *output
	done chan struct{}
	code int
	err  error
}

func startEpisode(t *testing.T, ctx context.Context, sb *gvx.Sandbox, in *os.File, out *output) *episode {
	t.Helper()
	e := &episode{sb: sb, in: in, out: out, done: make(chan struct{})}
	go func() {
		e.code, e.err = sb.Run(ctx)
		close(e.done)
	}()
	t.Cleanup(func() { sb.Close(); <-e.done })
	return e
}

// do runs a shell line in the guest and waits for its "ok TAG" marker.
func (e *episode) do(t *testing.T, tag, line string) string {
	t.Helper()
	if _, err := fmt.Fprintf(e.in, "%s; echo ok-%s\n", line, tag); err != nil {
		t.Fatalf("%s: stdin: %v", tag, err)
	}
	return e.out.waitFor(t, `(?s)(.*)ok-`+tag+`\n`)[1]
}

// lsData lists /data in the guest, sorted.
func (e *episode) lsData(t *testing.T, tag string) []string {
	t.Helper()
	s := e.do(t, tag, "echo ls-"+tag+"; echo $(ls /data)")
	i := strings.LastIndex(s, "ls-"+tag+"\n")
	var names []string
	for _, l := range strings.Split(s[i+len("ls-"+tag+"\n"):], "\n") {
		if strings.HasPrefix(l, "c") && regexp.MustCompile(`^c\d+$`).MatchString(l) {
			continue
		}
		names = append(names, strings.Fields(l)...)
	}
	sort.Strings(names)
	return names
}

// newCounter prepares the counter guest on vol, checkpointable into dir,
// its spec changed by edit (if any).
func newCounter(t *testing.T, ctx context.Context, vol, dir string, edit ...func(*spec.Spec)) (*gvx.Sandbox, *os.File, *output) {
	t.Helper()
	return newGuest(t, ctx, vol, dir, counterScript, nil, edit...)
}

// newGuest prepares a busybox guest running script with vol at /data and
// ports published, checkpointable into dir, its spec changed by edit; it
// returns the guest's stdin and stdout.
func newGuest(t *testing.T, ctx context.Context, vol, dir, script string, ports []spec.Port, edit ...func(*spec.Spec)) (*gvx.Sandbox, *os.File, *output) {
	t.Helper()
	pr, pw := stdinPipe(t)
	out := newOutput()
	s := &spec.Spec{
		Version:    spec.Version,
		Image:      imageRef,
		Entrypoint: []string{"sh", "-c"},
		Args:       []string{script},
		Network:    spec.NetworkNone,
		Isolation:  spec.IsolationSeccompOnly,
		Mounts:     []spec.Mount{{Type: spec.MountVolume, Source: vol, Target: "/data"}},
		Ports:      ports,
	}
	for _, f := range edit {
		f(s)
	}
	sb, err := gvx.NewFromSpec(ctx, s, gvx.Config{Rungv: rungvBin, Stdin: pr, Stdout: out})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.EnableCheckpoint(dir); err != nil {
		t.Fatal(err)
	}
	return sb, pw, out
}

// startCounter runs the counter guest on a golden volume (golden.txt) in
// a new directory, checkpointable into DIR/ck, until it has counted to 10
// (its spec changed by edit).
func startCounter(t *testing.T, ctx context.Context, edit ...func(*spec.Spec)) (dir string, e *episode) {
	t.Helper()
	need(t)
	poolEnv(t)
	dir, _ = poolDirs(t)
	vol := filepath.Join(dir, "golden.ext4")
	makeGolden(t, vol)
	sb, in, out := newCounter(t, ctx, vol, filepath.Join(dir, "ck"), edit...)
	e = startEpisode(t, ctx, sb, in, out)
	out.waitFor(t, `(?m)^c10$`)
	return dir, e
}

// volumeNames lists the root of the volume file vol, without lost+found.
func volumeNames(t *testing.T, vol string) []string {
	t.Helper()
	v, err := ext4lite.Open(vol, &ext4lite.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	ents, err := v.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if e != "lost+found" {
			names = append(names, e)
		}
	}
	sort.Strings(names)
	return names
}

// TestCheckpointRestore: a golden episode checkpointed once; two restores
// of it, each on its own clone of the companion volume, continue its
// counter from the saved value, run the image's programs, and see only
// their own writes; the companion volume keeps neither.
func TestCheckpointRestore(t *testing.T) {
	ctx := context.Background()
	dir, g := startCounter(t, ctx)
	sb, out := g.sb, g.out
	cp, err := sb.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-g.done
	if g.err != nil || g.code != 0 {
		t.Fatalf("checkpointed episode: exit %d, %v", g.code, g.err)
	}
	last := counters(out.String())
	saved := last[len(last)-1]

	var eps []*episode
	for _, name := range []string{"r1", "r2"} {
		pr, pw := stdinPipe(t)
		o := newOutput()
		r, err := cp.Restore(ctx, []string{filepath.Join(dir, name+".ext4")}, gvx.Config{Rungv: rungvBin, Stdin: pr, Stdout: o})
		if err != nil {
			t.Fatal(err)
		}
		eps = append(eps, startEpisode(t, ctx, r, pw, o))
	}
	for i, e := range eps {
		name := []string{"r1", "r2"}[i]
		got := e.do(t, name+"w", "echo "+name+" > /data/"+name+"; sync; cat /data/boot.txt")
		if !strings.Contains(got, "boot\n") {
			t.Errorf("%s: /data/boot.txt of the golden run not read back: %q", name, got)
		}
		e.out.waitFor(t, `(?m)^c\d+$`)
		if c := counters(e.out.String()); len(c) == 0 || c[0] != saved+1 {
			t.Errorf("%s: counter starts at %v, want %d (the checkpoint saw %d); output %q", name, c, saved+1, saved, e.out.String())
		}
	}
	for i, e := range eps {
		name := []string{"r1", "r2"}[i]
		if got, want := e.lsData(t, name+"l"), []string{"boot.txt", "count", "golden.txt", "lost+found", name}; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s sees %v in /data, want %v (its own file only)", name, got, want)
		}
	}
	for _, e := range eps {
		e.sb.Close()
		<-e.done
	}
	if got := volumeNames(t, cp.Spec.Mounts[0].Source); strings.Join(got, " ") != "boot.txt count golden.txt" {
		t.Errorf("companion volume holds %v, want boot.txt count golden.txt", got)
	}
	if got := volumeNames(t, filepath.Join(dir, "r1.ext4")); strings.Join(got, " ") != "boot.txt count golden.txt r1" {
		t.Errorf("r1's volume holds %v", got)
	}
}

// TestFork: a running episode forked into two; each child continues the
// parent's counter from where it was at the fork, the parent goes on, and
// all three diverge (each sees only its own new file).
func TestFork(t *testing.T) {
	ctx := context.Background()
	_, parent := startCounter(t, ctx)
	eps := forkEpisodes(t, ctx, parent, 2)
	names := []string{"parent", "kid0", "kid1"}
	for i, e := range eps {
		e.do(t, names[i]+"w", "echo "+names[i]+" > /data/"+names[i])
	}
	for i, e := range eps[1:] {
		e.out.waitFor(t, `(?m)^c\d+$`)
		c := counters(e.out.String())
		if len(c) == 0 || c[0] <= 10 {
			t.Fatalf("%s: counter %v: does not continue from the parent's (>10)", names[i+1], c)
		}
		// The parent printed the value before the fork and goes on past it
		// (waited for: under load the parent may not have printed the next
		// value yet when the child printed its first).
		parent.out.waitFor(t, fmt.Sprintf(`(?m)^c%d$`, c[0]+1))
		pc := counters(parent.out.String())
		if !containsInt(pc, c[0]-1) || !containsInt(pc, c[0]+1) {
			t.Errorf("%s starts at %d; the parent's counter %v should hold %d (before the fork) and %d (after)", names[i+1], c[0], pc, c[0]-1, c[0]+1)
		}
	}
	for i, e := range eps {
		want := []string{"boot.txt", "count", "golden.txt", "lost+found", names[i]}
		sort.Strings(want)
		if got := e.lsData(t, names[i]+"l"); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s sees %v in /data, want %v", names[i], got, want)
		}
	}
}

// forkEpisodes forks parent into n children, each driven through a stdin
// pipe of its own, and returns parent and the running children.
func forkEpisodes(t *testing.T, ctx context.Context, parent *episode, n int) []*episode {
	t.Helper()
	outs := make([]*output, n)
	ins := make([]*os.File, n)
	kids, _, err := parent.sb.Fork(ctx, n, func(i int) gvx.Config {
		pr, pw := stdinPipe(t)
		ins[i], outs[i] = pw, newOutput()
		return gvx.Config{Rungv: rungvBin, Stdin: pr, Stdout: outs[i]}
	})
	if err != nil {
		t.Fatal(err)
	}
	eps := []*episode{parent}
	for i, k := range kids {
		eps = append(eps, startEpisode(t, ctx, k, ins[i], outs[i]))
	}
	return eps
}

// checkpointSpec runs s (seccomp-only) until its stdout matches ready and
// checkpoints it into dir/ck (ending it); it returns the checkpoint and
// the guest's output.
func checkpointSpec(t *testing.T, ctx context.Context, s *spec.Spec, dir, ready string) (*gvx.Checkpoint, *output) {
	t.Helper()
	out := newOutput()
	sb, err := gvx.NewFromSpec(ctx, s, gvx.Config{Rungv: rungvBin, Stdout: out})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.EnableCheckpoint(filepath.Join(dir, "ck")); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _, _ = sb.Run(ctx); close(done) }()
	out.waitFor(t, ready)
	cp, err := sb.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-done
	return cp, out
}

// stdinPipe is a guest's stdin: an *os.File, which rungv gets as it is
// (an io.Reader would be copied by os/exec, whose Wait would then wait for
// that copy to end).
func stdinPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
