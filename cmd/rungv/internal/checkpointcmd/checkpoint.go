// Package checkpointcmd is rungv's checkpoint verb: boot an episode once,
// wait until it is ready, save it (gvx.Sandbox.Checkpoint).
package checkpointcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/rungv/internal/specflags"
	"z.gfire.dev/gvx/pkg/gvx"
	"z.gfire.dev/gvx/spec"
)

// Command is `rungv checkpoint`.
var Command = &cli.Command{
	Name:      "checkpoint",
	Usage:     "boot an episode of IMAGE once, wait until it is ready, and save it into a checkpoint directory",
	ArgsUsage: "IMAGE [COMMAND] [ARG...]",
	Description: `Runs the episode rungv run would run with the same flags, in
--isolation seccomp-only (the one mode with checkpoints: docs/runtime.md,
"Checkpoint, restore, fork"), waits until it is ready (--ready-socket: a
Docker API answers GET /_ping on that -p unix: socket; --ready: its stdout
holds TEXT), then saves it into --dir and ends it: gVisor's saved kernel
(uncompressed, so a restore reads its pages lazily), the episode's spec
(gvx-spec.json), and one companion volume per --mount type=volume
(volume-N.ext4), cloned once the episode has closed its volumes, so that it
holds exactly what the saved kernel saw. The volumes given are written by the
episode: give clones of the golden volume, not the golden volume itself.

Start an episode from it with rungv run --restore DIR, on a fresh clone of
each companion volume at the same target, with the same IMAGE, network and -p
count (its own socket paths):

   gvx-vol clone golden.ext4 boot.ext4
   rungv checkpoint --dir /srv/ck -p unix:/tmp/boot.sock:2375 --network none \
       --mount type=volume,src=boot.ext4,dst=/var/lib/docker \
       --ready-socket /tmp/boot.sock IMAGE dockerd -H tcp://0.0.0.0:2375
   gvx-vol clone /srv/ck/volume-0.ext4 ep1.ext4
   rungv run --isolation seccomp-only --network none --restore /srv/ck \
       -p unix:/tmp/ep1.sock:2375 \
       --mount type=volume,src=ep1.ext4,dst=/var/lib/docker IMAGE

With --network nat each restore gets a NAT of its own (eth0, its route and
resolv.conf as the guest had them; connections open at the save are gone)
under the restore's own --egress/--allow-host-port, not the checkpoint's.

It prints one JSON line: {"dir", "volumes", "ready_seconds",
"checkpoint_seconds"}.`,
	Flags: append(specflags.Flags(),
		&cli.StringFlag{Name: "dir", Required: true, Usage: "the checkpoint `DIR` (made if missing; must hold no checkpoint)"},
		&cli.StringFlag{Name: "ready-socket", Usage: "ready once a Docker API answers GET /_ping on this unix socket `PATH` (a -p unix: socket of the episode)"},
		&cli.StringFlag{Name: "ready", Usage: "ready once the guest's stdout holds `TEXT`"},
		&cli.DurationFlag{Name: "ready-timeout", Value: 2 * time.Minute, Usage: "give up if the episode is not ready by then"},
	),
	Action: run,
}

const verb = "rungv checkpoint"

// result is the JSON line printed.
type result struct {
	Dir        string   `json:"dir"`
	Volumes    []string `json:"volumes"`
	Ready      float64  `json:"ready_seconds"`
	Checkpoint float64  `json:"checkpoint_seconds"`
}

func fail(format string, a ...any) error {
	return cli.Exit(verb+": "+fmt.Sprintf(format, a...), 125)
}

func run(c *cli.Context) (err error) {
	saved := false
	if c.String("ready-socket") == "" && c.String("ready") == "" {
		return specflags.Usage(verb, "say when the episode is ready: --ready-socket PATH or --ready TEXT")
	}
	s, err := specflags.Spec(c, verb)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fail("%v", err)
	}
	// The guest's stdout goes to stderr: stdout is the result.
	out := &watch{w: c.App.ErrWriter, text: []byte(c.String("ready")), seen: make(chan struct{})}
	sb, err := gvx.NewFromSpec(c.Context, s, gvx.Config{Rungv: self, Stdout: out, Stderr: c.App.ErrWriter})
	if err != nil {
		return fail("%v", err)
	}
	defer sb.Close()
	dir := c.String("dir")
	if _, err := os.Lstat(dir); os.IsNotExist(err) {
		// Ours: a failed checkpoint leaves no half-made directory.
		defer func() {
			if !saved {
				os.RemoveAll(dir)
			}
		}()
	}
	if err := sb.EnableCheckpoint(dir); err != nil {
		return fail("%v", err)
	}
	t0 := time.Now()
	done := make(chan ran, 1)
	go func() {
		code, err := sb.Run(context.Background())
		done <- ran{code, err}
	}()
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("ready-timeout"))
	defer cancel()
	if err := waitReady(ctx, c.String("ready-socket"), out, done); err != nil {
		return fail("%v", err)
	}
	ready := time.Since(t0)
	t1 := time.Now()
	cp, err := sb.Checkpoint(c.Context)
	if err != nil {
		return fail("%v", err)
	}
	saved = true
	r := result{Dir: cp.Dir, Ready: ready.Seconds(), Checkpoint: time.Since(t1).Seconds()}
	for _, m := range cp.Spec.Mounts {
		if m.Type == spec.MountVolume {
			r.Volumes = append(r.Volumes, m.Source)
		}
	}
	b, _ := json.Marshal(r)
	fmt.Fprintf(c.App.Writer, "%s\n", b)
	return nil
}

// watch passes the guest's stdout on and notices text in it (one
// writer: os/exec's copy).
type watch struct {
	w     io.Writer
	text  []byte
	tail  []byte
	found bool
	seen  chan struct{} // closed once text was seen
}

func (o *watch) Write(p []byte) (int, error) {
	if !o.found && len(o.text) > 0 {
		o.tail = append(o.tail, p...)
		if bytes.Contains(o.tail, o.text) {
			o.found, o.tail = true, nil
			close(o.seen)
		} else if n := len(o.text); len(o.tail) > n {
			o.tail = append(o.tail[:0], o.tail[len(o.tail)-n:]...)
		}
	}
	return o.w.Write(p)
}

// ran is how the episode's Run ended.
type ran struct {
	code int
	err  error
}

// waitReady waits until every ready condition given holds (a Docker API
// answering on sock; out's text seen), the episode ends, or ctx is done.
func waitReady(ctx context.Context, sock string, out *watch, done <-chan ran) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	seen := out.seen
	if len(out.text) == 0 {
		seen = nil
	}
	textOK := seen == nil
	for {
		if textOK && (sock == "" || ping(ctx, sock) == nil) {
			return nil
		}
		select {
		case <-seen:
			textOK, seen = true, nil
		case r := <-done:
			return fmt.Errorf("the episode ended before it was ready (exit %d, %v)", r.code, r.err)
		case <-ctx.Done():
			return fmt.Errorf("the episode was not ready within --ready-timeout (%w): is the ready condition right?", ctx.Err())
		case <-tick.C:
		}
	}
}

// ping is one GET /_ping on the Docker API at the unix socket sock.
func ping(ctx context.Context, sock string) error {
	// No keep-alive: a connection the guest still holds is a host socket
	// gVisor cannot save.
	cl := http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}, Timeout: time.Second}
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://docker/_ping", nil)
	resp, err := cl.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /_ping: %s", resp.Status)
	}
	return nil
}
