package gvx

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"z.gfire.dev/gvx/internal/privdir"
	"z.gfire.dev/gvx/reflink"
	"z.gfire.dev/gvx/spec"
)

// Checkpoint, restore, fork (docs/runtime.md, "Checkpoint, restore,
// fork"): a Sandbox started with EnableCheckpoint can be saved once, by
// Checkpoint (it ends; a golden daemon booted once) or by Fork (it goes
// on, and n children continue from the same instant). A Checkpoint is a
// directory: gVisor's saved kernel (uncompressed), the episode's spec, and
// one companion volume per volume mount, a clone of the volume at that
// instant. Restore starts an episode from it on fresh reflink clones of
// the companions, so that every restored episode sees exactly the bytes
// the checkpoint saw, and only its own writes. Needs
// spec.IsolationSeccompOnly (rungv refuses checkpoints in the namespaced
// mode; an IsolationAuto episode is switched to it by EnableCheckpoint).

// SpecFile is the name of the episode's spec in a checkpoint directory;
// its volume mounts name the companion volumes.
const SpecFile = "gvx-spec.json"

// ErrNoCheckpoint reports a Checkpoint or Fork of a Sandbox that was not
// prepared with EnableCheckpoint, or was saved already.
var ErrNoCheckpoint = errors.New("gvx: the sandbox cannot be checkpointed: call EnableCheckpoint before Run, once")

// ErrNotSaved reports a Fork the episode refused before it saved anything
// (gVisor could not save it: a client still connected to one of its
// sockets, say): the episode runs on unchanged, and can be forked again.
var ErrNotSaved = errors.New("gvx: the episode was not saved and runs on unchanged")

// notSaved is the episode's refusal of a save: its message, and
// ErrNotSaved for errors.Is.
type notSaved struct{ err error }

func (e notSaved) Error() string   { return e.err.Error() }
func (e notSaved) Unwrap() []error { return []error{e.err, ErrNotSaved} }

// replyError is an error the episode answered (spec.ControlReply.Error).
type replyError struct{ msg string }

func (e *replyError) Error() string { return "gvx: " + e.msg }

// Checkpoint is a saved episode.
type Checkpoint struct {
	// Dir holds the checkpoint (remove it with os.RemoveAll when done).
	Dir string
	// Spec is the checkpointed episode's spec; its volume mounts' Source
	// are the companion volumes in Dir.
	Spec *spec.Spec
}

// checkpointing is a Sandbox's part in checkpoints: the flags and the
// control socket rungv run gets.
type checkpointing struct {
	dir     string // --checkpoint-dir ("": none)
	restore string // --restore ("": none)

	mu     sync.Mutex
	ours   *os.File // the control socket; nil without dir
	theirs *os.File // rungv's end, fd 5, closed once it started
	in     *bufio.Reader
	used   bool
}

// args are rungv run's flags for c (nil-safe).
func (c *checkpointing) args() []string {
	if c == nil {
		return nil
	}
	var a []string
	if c.restore != "" {
		a = append(a, "--restore="+c.restore)
	}
	if c.dir != "" {
		a = append(a, "--checkpoint-dir="+c.dir, "--control-fd=5")
	}
	return a
}

// files are rungv's descriptors from fd 5 (nil-safe).
func (c *checkpointing) files() []*os.File {
	if c == nil || c.theirs == nil {
		return nil
	}
	return []*os.File{c.theirs}
}

// started closes rungv's end in this process.
func (c *checkpointing) started() {
	if c != nil && c.theirs != nil {
		c.theirs.Close()
		c.theirs = nil
	}
}

// request sends r and reads the reply; want is the reply's op.
func (c *checkpointing) request(r spec.ControlRequest, want string) error {
	b, _ := json.Marshal(r)
	if _, err := c.ours.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("gvx: checkpoint: the episode's control socket: %w (has it exited?)", err)
	}
	line, err := c.in.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("gvx: checkpoint: no reply from the episode: %w (has it exited?)", err)
	}
	var rep spec.ControlReply
	if err := json.Unmarshal(line, &rep); err != nil {
		return fmt.Errorf("gvx: checkpoint: bad reply %q: %v", line, err)
	}
	if rep.Error != "" {
		return &replyError{rep.Error}
	}
	if rep.Op != want {
		return fmt.Errorf("gvx: checkpoint: reply %q, want %q", rep.Op, want)
	}
	return nil
}

// EnableCheckpoint prepares s, before Run, to be saved once into dir (made
// if missing; it must hold no checkpoint) by Checkpoint or Fork. An
// IsolationAuto episode is switched to spec.IsolationSeccompOnly, the only
// mode with checkpoints; a namespaced one is refused.
func (s *Sandbox) EnableCheckpoint(dir string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.closed {
		return fmt.Errorf("gvx: EnableCheckpoint: call it before Run")
	}
	if s.ck != nil && s.ck.dir != "" {
		return fmt.Errorf("gvx: EnableCheckpoint: already enabled (into %s)", s.ck.dir)
	}
	switch s.spec.Isolation {
	case spec.IsolationAuto, "":
		s.spec.Isolation = spec.IsolationSeccompOnly
	case spec.IsolationSeccompOnly:
	default:
		return fmt.Errorf("gvx: EnableCheckpoint: isolation %s: checkpoints need %s (docs/runtime.md, \"Checkpoint, restore, fork\")", s.spec.Isolation, spec.IsolationSeccompOnly)
	}
	b, err := s.spec.Marshal()
	if err != nil {
		return fmt.Errorf("gvx: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("gvx: EnableCheckpoint: %w", err)
	}
	ours, theirs, err := controlPair()
	if err != nil {
		return fmt.Errorf("gvx: EnableCheckpoint: %w", err)
	}
	if s.ck == nil {
		s.ck = &checkpointing{}
	}
	s.json = b
	s.ck.dir = abs
	s.ck.ours, s.ck.theirs = ours, theirs
	s.ck.in = bufio.NewReader(s.ck.ours)
	return nil
}

// take claims s's one checkpoint.
func (s *Sandbox) take() (*checkpointing, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.ck
	if c == nil || c.ours == nil || c.used {
		return nil, ErrNoCheckpoint
	}
	if !s.started {
		return nil, fmt.Errorf("gvx: checkpoint: the sandbox is not running (call Run first)")
	}
	c.used = true
	return c, nil
}

// Checkpoint saves the running s and ends it (its Run returns 0): the
// checkpoint of a golden episode booted once. Once it has ended, its
// volumes, closed cleanly, are cloned into the checkpoint as companions.
func (s *Sandbox) Checkpoint(ctx context.Context) (*Checkpoint, error) {
	c, err := s.take()
	if err != nil {
		return nil, err
	}
	if err := c.request(spec.ControlRequest{Op: spec.OpCheckpoint}, spec.OpCheckpointed); err != nil {
		return nil, err
	}
	s.mu.Lock()
	exited := s.exited
	s.mu.Unlock()
	select {
	case <-exited:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return saveCompanions(c.dir, s.spec)
}

// Fork saves the running s without ending it and returns n sandboxes,
// not yet run, that continue from that instant: each on its own clones
// of the volumes (in the checkpoint directory, as child-I-vol-J.ext4),
// with proc's Stdin, Stdout, Stderr, Rungv and Ports (its own sockets, as
// Restore takes them). s is paused from the save
// until its volumes are cloned, then goes on. Run each child, then Close
// it; the checkpoint directory (returned too) can start more children
// with Restore. A fork the episode refused before it saved anything
// returns an error that is ErrNotSaved (errors.Is): s runs on unchanged
// and may be forked again.
func (s *Sandbox) Fork(ctx context.Context, n int, proc func(i int) Config) ([]*Sandbox, *Checkpoint, error) {
	c, err := s.take()
	if err != nil {
		return nil, nil, err
	}
	if err := c.request(spec.ControlRequest{Op: spec.OpCheckpoint, Resume: true}, spec.OpPaused); err != nil {
		var re *replyError
		if errors.As(err, &re) {
			// rungv refused before it saved (every error it answers to a
			// checkpoint with resume is one: runtime/checkpoint): the
			// episode runs on as it was and may be forked again.
			s.mu.Lock()
			c.used = false
			s.mu.Unlock()
			return nil, nil, notSaved{err}
		}
		return nil, nil, err
	}
	cp, cerr := saveCompanions(c.dir, s.spec) // while the episode is paused
	if err := c.request(spec.ControlRequest{Op: spec.OpResume}, spec.OpResumed); err != nil && cerr == nil {
		cerr = err
	}
	if cerr != nil {
		return nil, nil, cerr
	}
	var kids []*Sandbox
	for i := 0; i < n; i++ {
		var vols []string
		for j := range volumeMounts(cp.Spec) {
			vols = append(vols, filepath.Join(cp.Dir, "child-"+strconv.Itoa(i)+"-vol-"+strconv.Itoa(j)+".ext4"))
		}
		var pc Config
		if proc != nil {
			pc = proc(i)
		}
		k, err := cp.Restore(ctx, vols, pc)
		if err != nil {
			return nil, nil, err
		}
		kids = append(kids, k)
	}
	return kids, cp, nil
}

// volumeMounts are the indexes of s's volume mounts, in order.
func volumeMounts(s *spec.Spec) []int {
	var idx []int
	for i, m := range s.Mounts {
		if m.Type == spec.MountVolume {
			idx = append(idx, i)
		}
	}
	return idx
}

// saveCompanions clones each volume of s into dir (volume-J.ext4) and
// writes the checkpoint's spec, whose volumes name the clones.
func saveCompanions(dir string, s *spec.Spec) (*Checkpoint, error) {
	cs := s.Clone()
	for j, i := range volumeMounts(cs) {
		dst := filepath.Join(dir, companionName(j))
		if _, err := reflink.CloneFile(cs.Mounts[i].Source, dst, reflink.Options{Mode: reflink.Auto}); err != nil {
			return nil, fmt.Errorf("gvx: checkpoint: companion of the volume at %s: %w", cs.Mounts[i].Target, err)
		}
		cs.Mounts[i].Source = dst
	}
	b, err := json.MarshalIndent(cs, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("gvx: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, SpecFile), b, 0o600); err != nil {
		return nil, fmt.Errorf("gvx: checkpoint: %w", err)
	}
	return &Checkpoint{Dir: dir, Spec: cs}, nil
}

// maxSpecFile bounds a checkpoint's SpecFile (an episode spec: KiB).
const maxSpecFile = 64 << 20

// checkCompanions refuses a checkpoint whose directory or first n
// companion volumes are not the caller's own: each must be a regular file
// (not a symlink to another episode's clone or a file of the caller's),
// owned by the caller and writable by no one else, since the restore
// hands the guest a copy of it.
func checkCompanions(dir string, n int) error {
	d, err := privdir.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	for j := range n {
		f, err := d.OpenFile(companionName(j))
		if err != nil {
			return err
		}
		f.Close()
	}
	return nil
}

// companionName is the file name of a checkpoint's j-th companion volume.
func companionName(j int) string { return "volume-" + strconv.Itoa(j) + ".ext4" }

// OpenCheckpoint reads the checkpoint in dir (made by Checkpoint or Fork,
// or `rungv checkpoint`). Its volumes are its own companions in dir,
// wherever the directory was when it was saved: a spec that names any
// other file as one (another episode's clone, say) is refused, since a
// restore would hand the guest a copy of it.
func OpenCheckpoint(dir string) (*Checkpoint, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("gvx: %w", err)
	}
	d, err := privdir.Open(abs)
	if err != nil {
		return nil, fmt.Errorf("gvx: checkpoint %s: %w; a restore trusts what is in it: use a directory of your own", dir, err)
	}
	defer d.Close()
	f, err := d.OpenFile(SpecFile)
	if err != nil {
		return nil, fmt.Errorf("gvx: checkpoint %s: %w (not made by gvx's Checkpoint, Fork or rungv checkpoint?)", dir, err)
	}
	defer f.Close()
	s, err := spec.Decode(io.LimitReader(f, maxSpecFile))
	if err != nil {
		return nil, fmt.Errorf("gvx: checkpoint %s: %w", dir, err)
	}
	for j, i := range volumeMounts(s) {
		m := &s.Mounts[i]
		if filepath.Base(m.Source) != companionName(j) {
			return nil, fmt.Errorf("gvx: checkpoint %s: %s names %s as the volume at %s, not the checkpoint's own %s: a checkpoint restores only its own companions (take it again)", abs, SpecFile, m.Source, m.Target, companionName(j))
		}
		m.Source = filepath.Join(abs, companionName(j))
	}
	return &Checkpoint{Dir: abs, Spec: s}, nil
}

// Restore prepares an episode, not yet run, that starts from the
// checkpoint: vols are the host paths of its volumes, one per volume
// mount of the checkpoint in order, which Restore makes as reflink clones
// (a sparse copy where the filesystem cannot clone) of the companions;
// they must not exist. proc sets Stdin, Stdout, Stderr and Rungv, and, for
// a checkpoint that publishes ports, Ports: the restored episode's own
// host sockets or addresses, one per published port of the checkpoint in
// order (GuestPort 0 or the same). The caller removes vols when done. The
// episode can itself be checkpointed (EnableCheckpoint before Run).
func (c *Checkpoint) Restore(ctx context.Context, vols []string, proc Config) (*Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ports := proc.Ports
	proc.Ports = nil
	if err := onlyProcess(proc); err != nil {
		return nil, fmt.Errorf("%w (and Ports, for a restore)", err)
	}
	s := c.Spec.Clone()
	if len(ports) != len(s.Ports) {
		return nil, fmt.Errorf("gvx: restore %s: the checkpoint publishes %d ports: give the restored episode its own host socket for each (Config.Ports, in order), not %d", c.Dir, len(s.Ports), len(ports))
	}
	for i, p := range ports {
		if p.GuestPort != 0 && p.GuestPort != s.Ports[i].GuestPort {
			return nil, fmt.Errorf("gvx: restore %s: Ports[%d] is guest port %d, the checkpoint's is %d", c.Dir, i, p.GuestPort, s.Ports[i].GuestPort)
		}
		s.Ports[i].HostSocket, s.Ports[i].HostAddr = p.HostSocket, p.HostAddr
	}
	idx := volumeMounts(c.Spec)
	if len(vols) != len(idx) {
		return nil, fmt.Errorf("gvx: restore %s: %d volume paths for %d volumes", c.Dir, len(vols), len(idx))
	}
	bin, err := findRungv(proc.Rungv)
	if err != nil {
		return nil, err
	}
	if err := checkCompanions(c.Dir, len(idx)); err != nil {
		return nil, fmt.Errorf("gvx: restore %s: %w", c.Dir, err)
	}
	for j, i := range idx {
		if _, err := reflink.CloneFile(s.Mounts[i].Source, vols[j], reflink.Options{Mode: reflink.Auto, NoSync: true}); err != nil {
			return nil, fmt.Errorf("gvx: restore %s: clone the volume at %s: %w", c.Dir, s.Mounts[i].Target, err)
		}
		s.Mounts[i].Source = vols[j]
	}
	sb, err := newSandbox(bin, s, proc)
	if err != nil {
		return nil, err
	}
	sb.ck = &checkpointing{restore: c.Dir}
	return sb, nil
}
