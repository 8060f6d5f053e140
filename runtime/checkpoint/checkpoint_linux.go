package checkpoint

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/sentry/control"
	"gvisor.dev/gvisor/pkg/sentry/state/checkpointfiles"
	"gvisor.dev/gvisor/pkg/state/statefile"
	"gvisor.dev/gvisor/pkg/unet"
	"gvisor.dev/gvisor/pkg/urpc"
	"gvisor.dev/gvisor/runsc/boot"

	"z.gfire.dev/gvx/internal/privdir"
	"z.gfire.dev/gvx/runtime/volume"
	"z.gfire.dev/gvx/spec"
)

// InfoFile is the name of the Info in a checkpoint
// directory.
const InfoFile = "gvx-checkpoint.json"

// Info is what a checkpoint directory records besides gVisor's
// files.
type Info struct {
	// ContainerID is the sandbox's container ID; the restored kernel's
	// tasks carry it, so a restore reuses it.
	ContainerID string `json:"container_id"`
	// Volumes are the guest paths of the volume mounts, in mount order:
	// a restore needs a volume at each (a clone of the companion).
	Volumes []string `json:"volumes"`
	// Network is the guest's network mode; a restore keeps it.
	Network spec.NetworkMode `json:"network"`
	// PassFDs are the descriptor numbers the sandbox held the published
	// ports' pairs at: gVisor saves them (transport.HostSender), so a
	// restore must pass its own at the same numbers (checkRestorePassFDs).
	// Missing (nil) in a checkpoint made before it was recorded.
	PassFDs []int `json:"pass_fds"`
}

// ReadInfo reads dir's Info.
func ReadInfo(dir string) (*Info, error) {
	d, err := openDir(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	defer d.Close()
	return readInfo(d)
}

// readInfo reads the Info of the checkpoint open as d.
func readInfo(d *privdir.Dir) (*Info, error) {
	dir := d.Path()
	b, err := d.ReadFile(InfoFile, maxInfo)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w (not a checkpoint directory made by rungv checkpoint?)", dir, err)
	}
	var ci Info
	if err := json.Unmarshal(b, &ci); err != nil || ci.ContainerID == "" {
		return nil, fmt.Errorf("checkpoint %s: %s is malformed: %v", dir, InfoFile, err)
	}
	if err := ci.validate(); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %s: %w (a restore uses only what rungv checkpoint wrote: take the checkpoint again)", dir, InfoFile, err)
	}
	return &ci, nil
}

// gvisorFiles are gVisor's three files, in the order the save and
// restore RPCs take them.
var gvisorFiles = []string{checkpointfiles.StateFileName, checkpointfiles.PagesMetadataFileName, checkpointfiles.PagesFileName}

// Create makes dir (it must not hold a checkpoint yet), writes
// the spec and info, and creates gVisor's files, returned open: they are
// made before the host side locks down.
func Create(dir string, specJSON []byte, info Info) ([]*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("--checkpoint-dir: %w", err)
	}
	if err := checkDir(dir); err != nil {
		return nil, fmt.Errorf("--checkpoint-dir %s: %w", dir, err)
	}
	var files []*os.File
	fail := func(err error) ([]*os.File, error) {
		for _, f := range files {
			f.Close()
		}
		return nil, fmt.Errorf("--checkpoint-dir %s: %w", dir, err)
	}
	for _, n := range gvisorFiles {
		f, err := os.OpenFile(filepath.Join(dir, n), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			return fail(fmt.Errorf("%s exists: a checkpoint directory takes one checkpoint; name a new one", n))
		}
		if err != nil {
			return fail(err)
		}
		files = append(files, f)
	}
	js, _ := json.MarshalIndent(info, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, InfoFile), js, 0o600); err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), specJSON, 0o600); err != nil {
		return fail(err)
	}
	return files, nil
}

// checkDir refuses a checkpoint directory that someone else
// could have written: a restore trusts its config.json (the rootfs and
// image paths on the host, the mounts) and its saved kernel, so the
// directory must be a real directory (not a symlink) owned by this user
// and writable by no one else. An existing directory another user made
// (in /tmp, say) would otherwise let them swap those files in before a
// restore, or after the checkpoint wrote them.
//
// The directory is opened without following a symlink and judged by its
// descriptor (privdir.Check).
func checkDir(dir string) error {
	err := privdir.Check(dir)
	var pe *privdir.Error
	switch {
	case errors.As(err, &pe):
		return fmt.Errorf("%w: a restore trusts what is in it; use a new directory of your own (or chmod go-w it, if it is yours)", err)
	case err != nil:
		return fmt.Errorf("%w (not a checkpoint directory made by rungv checkpoint?)", err)
	}
	return nil
}

// openDir opens the checkpoint directory dir, checked as
// checkDir does; its files are then opened through it, each
// refused if it is a symlink, not a regular file, or writable or owned by
// someone else (a checkpoint copied with cp -a from another user's, a link
// put in it): a restore loads a whole saved kernel from them.
func openDir(dir string) (*privdir.Dir, error) {
	d, err := privdir.Open(dir)
	var pe *privdir.Error
	switch {
	case errors.As(err, &pe):
		return nil, fmt.Errorf("%w: a restore trusts what is in it; use a new directory of your own (or chmod go-w it, if it is yours)", err)
	case err != nil:
		return nil, fmt.Errorf("%w (not a checkpoint directory made by rungv checkpoint?)", err)
	}
	return d, nil
}

// Open opens dir's files for a restore: gVisor's, and the spec.
func Open(dir string) (files []*os.File, specJSON []byte, info *Info, err error) {
	d, err := openDir(dir)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	defer d.Close()
	if info, err = readInfo(d); err != nil {
		return nil, nil, nil, err
	}
	if specJSON, err = d.ReadFile("config.json", maxSpec); err != nil {
		return nil, nil, nil, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	for _, n := range gvisorFiles {
		f, err := d.OpenFile(n)
		if err == nil {
			var st os.FileInfo
			if st, err = f.Stat(); err == nil && st.Size() == 0 && n == checkpointfiles.StateFileName {
				err = errors.New("empty: the episode was never checkpointed (no checkpoint request reached it, or it failed)")
			}
		}
		if err != nil {
			if f != nil {
				f.Close()
			}
			for _, f := range files {
				f.Close()
			}
			return nil, nil, nil, fmt.Errorf("checkpoint %s: %s: %w", dir, n, err)
		}
		files = append(files, f)
	}
	return files, specJSON, info, nil
}

// RestoreSandbox asks a booted (not started) sandbox to restore the
// checkpoint in files (Open's): its kernel is replaced by the
// saved one, which runs on. The pages are loaded in the background.
func RestoreSandbox(ctl *urpc.Client, files []*os.File) error {
	opts := boot.RestoreOpts{FilePayload: urpc.FilePayload{Files: files}, HavePagesFile: true, Background: true}
	return ctl.Call(boot.ContMgrRestore, &opts, nil)
}

// RedialControl connects fd (an AF_UNIX stream socket made before the
// lockdown, which allows connect but no socket) to the sandbox's control
// socket at path and returns the client; it owns fd either way.
func RedialControl(fd int, path string) (*urpc.Client, error) {
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	s, err := unet.NewSocket(fd)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return urpc.NewClient(s), nil
}

// Controller serves Host.Control for a running seccomp-only
// episode.
type Controller struct {
	// ended is set once a checkpoint ended the episode: its exit status
	// is 0, whatever the killed guest's.
	ended atomic.Bool
	// told is closed once the caller has the reply to the checkpoint that
	// ended the episode: the run waits for it (AwaitTold), or the process
	// could exit, the guest being dead, before that reply was written,
	// and the caller would read EOF instead (seen under load in
	// TestRestoreHostileCheckpoint).
	told     chan struct{}
	tellOnce sync.Once
	id       string // the sandbox's container ID
	ctl      *urpc.Client
	files    []*os.File // Create's; nil once used
	vols     []*volume.Conn
	// saveLinks has the in-guest relay record the guest's bridges
	// (runtime/net's relaylinks_linux.go) before a save; nil: nothing to do.
	saveLinks func()
}

// NewController serves Host.Control for the seccomp-only sandbox id whose
// control server ctl is: files are Create's (nil: no checkpoint
// directory), vols the volume servers to hold still while a paused
// guest's volumes are cloned, saveLinks (may be nil) what runs before each
// save.
func NewController(id string, ctl *urpc.Client, files []*os.File, vols []*volume.Conn, saveLinks func()) *Controller {
	return &Controller{id: id, ctl: ctl, files: files, vols: vols, saveLinks: saveLinks, told: make(chan struct{})}
}

// SetClient replaces the control server's client (after a restore the
// sandbox is dialled again: RedialControl).
func (c *Controller) SetClient(ctl *urpc.Client) { c.ctl = ctl }

// Ended reports whether a checkpoint ended the episode: its exit status
// is then 0, whatever the killed guest's.
func (c *Controller) Ended() bool { return c.ended.Load() }

// Close closes Create's files if no checkpoint used them.
func (c *Controller) Close() {
	for _, f := range c.files {
		f.Close()
	}
	c.files = nil
}

// Serve answers requests on rw until it reaches EOF.
func (c *Controller) Serve(rw io.ReadWriter) {
	in := bufio.NewScanner(rw)
	enc := json.NewEncoder(rw)
	reply := func(op string, err error) {
		r := spec.ControlReply{Op: op}
		if err != nil {
			r = spec.ControlReply{Error: err.Error()}
		}
		_ = enc.Encode(r)
	}
	for in.Scan() {
		var req spec.ControlRequest
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			reply("", fmt.Errorf("control: bad request %q: %v", in.Bytes(), err))
			continue
		}
		switch req.Op {
		case spec.OpCheckpoint:
			if !req.Resume {
				reply(spec.OpCheckpointed, c.checkpoint(false))
				if c.ended.Load() {
					c.tellOnce.Do(func() { close(c.told) })
				}
				continue
			}
			if err := c.checkpoint(true); err != nil {
				reply("", err)
				continue
			}
			// Paused and saved: hold every volume still while the caller
			// clones them, until it says resume (or goes away).
			err := c.freeze(0, func() error {
				reply(spec.OpPaused, nil)
				for in.Scan() {
					var r spec.ControlRequest
					if json.Unmarshal(in.Bytes(), &r) == nil && r.Op == spec.OpResume {
						return nil
					}
					reply("", errors.New("control: paused: only resume is accepted"))
				}
				return nil
			})
			rerr := c.ctl.Call(boot.ContMgrResume, &struct{}{}, nil)
			if err == nil {
				err = rerr
			}
			reply(spec.OpResumed, err)
		default:
			reply("", fmt.Errorf("control: unknown op %q (checkpoint, resume)", req.Op))
		}
	}
}

// AwaitTold waits, at most toldWait, until the caller has the reply to
// the checkpoint that ended the episode.
func (c *Controller) AwaitTold() {
	if !c.ended.Load() {
		return
	}
	select {
	case <-c.told:
	case <-time.After(toldWait):
	}
}

// toldWait bounds AwaitTold: the reply is one short line on a socket.
const toldWait = 5 * time.Second

// freeze holds volumes i... still (Conn.Freeze, nested) while fn runs.
func (c *Controller) freeze(i int, fn func() error) error {
	if i == len(c.vols) {
		return fn()
	}
	return c.vols[i].Freeze(func() error { return c.freeze(i+1, fn) })
}

// checkpoint saves the kernel into the files made at start. The kernel
// is paused first and stays paused afterwards (gVisor's save nests inside
// that pause): with resume it goes on once the caller is done with the
// volumes; without, every guest process is killed before it runs again,
// so the episode ends (its volumes closed cleanly) as the checkpoint saw
// it. gVisor cannot save a host socket the guest holds (a connection to
// a published port being served): then it resumes the guest for a moment,
// so that the relay can finish the connection, and tries again for up to
// saveRetry.
func (c *Controller) checkpoint(resume bool) error {
	if c.files == nil {
		return errors.New("control: checkpoint: this episode has no checkpoint directory (Host.CheckpointDir), or was checkpointed already")
	}
	files := c.files
	c.files = nil
	saved := false
	defer func() {
		if !saved {
			// Nothing was saved and the guest runs on as it was: the
			// files stay for another attempt (a fork refused because a
			// client was connected can be asked again), emptied so that
			// a restore from the directory meanwhile finds no checkpoint
			// rather than a part of one.
			for _, f := range files {
				_ = f.Truncate(0)
			}
			c.files = files
			return
		}
		for _, f := range files {
			f.Close()
		}
	}()
	// The network stack is saved without its links: the relay records
	// the guest's bridges so that a restore can make them again.
	if c.saveLinks != nil {
		c.saveLinks()
	}
	deadline := time.Now().Add(saveRetry)
	for {
		if err := c.ctl.Call(boot.ContMgrPause, &struct{}{}, nil); err != nil {
			return fmt.Errorf("control: pause: %w", err)
		}
		err := c.save(files)
		if err == nil {
			saved = true
			break
		}
		_ = c.ctl.Call(boot.ContMgrResume, &struct{}{}, nil)
		if !strings.Contains(err.Error(), "not savable") || time.Now().After(deadline) {
			return saveFailed(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if resume {
		return nil
	}
	c.ended.Store(true)
	args := boot.SignalArgs{CID: c.id, Signo: int32(unix.SIGKILL), Mode: boot.DeliverToAllProcesses}
	if err := c.ctl.Call(boot.ContMgrSignal, &args, nil); err != nil {
		return fmt.Errorf("control: checkpoint saved, but ending the episode failed: %w", err)
	}
	return c.ctl.Call(boot.ContMgrResume, &struct{}{}, nil)
}

// saveRetry bounds how long checkpoint retries a save that met a host
// socket.
const saveRetry = 2 * time.Second

// save is one save of the paused kernel into files (rewound first).
func (c *Controller) save(files []*os.File) error {
	for _, f := range files {
		if err := f.Truncate(0); err != nil {
			return err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
	}
	opts := control.SaveOpts{
		Metadata:      statefile.CompressionLevelNone.ToMetadata(),
		Resume:        true, // the pause around it is ours
		FilePayload:   urpc.FilePayload{Files: files},
		HavePagesFile: true,
	}
	return c.ctl.Call(boot.ContMgrCheckpoint, &opts, nil)
}

// saveFailed is the one-line error of a save gVisor refused, with what to
// change where gvx knows it. gVisor's error can carry the Sentry's
// goroutine dump (an encoding error's stack): that goes to rungv's
// stderr, the episode's log, not to the caller.
func saveFailed(err error) error {
	msg := err.Error()
	line, rest, _ := strings.Cut(msg, "\n")
	line = strings.TrimRight(strings.TrimSpace(line), ":")
	if strings.TrimSpace(rest) != "" {
		fmt.Fprintf(os.Stderr, "rungv: checkpoint: gVisor's save failed (the episode goes on, unchanged):\n%s\n", msg)
	}
	return fmt.Errorf("control: checkpoint: %s%s", line, saveHint(err))
}

// saveHint says what to change for a save gVisor refused.
func saveHint(err error) string {
	if strings.Contains(err.Error(), "not savable") {
		return " (the guest holds a host socket: a client is still connected to a published port; close every connection to the episode's sockets, keep-alive ones included, and checkpoint again)"
	}
	return ""
}
