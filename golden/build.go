package golden

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"

	"z.gfire.dev/gvx/erofs/cache"
	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/image"
	"z.gfire.dev/gvx/internal/durable"
	"z.gfire.dev/gvx/internal/termsafe"
	"z.gfire.dev/gvx/internal/units"
	"z.gfire.dev/gvx/pkg/gvx"
	"z.gfire.dev/gvx/runtime/dind"
)

// DefaultDaemonImage is the daemon image of the seeds' workflow.
const DefaultDaemonImage = "docker:dind"

// DefaultSize is the volume size when Options.Size is 0 (a sparse file:
// only what is written takes space).
const DefaultSize = 32 << 30

// DefaultReadyTimeout is how long the daemon may take to answer when
// Options.ReadyTimeout is 0.
const DefaultReadyTimeout = 2 * time.Minute

var (
	// ErrBadOption reports Options that cannot be built from (a bad
	// reference, platform or size); nothing was created.
	ErrBadOption = errors.New("golden: invalid option")
	// ErrExists reports an Out that exists while Force is off.
	ErrExists = errors.New("golden: the output exists")
)

// Options describe one golden volume.
type Options struct {
	// Out is the volume to publish (made absolute).
	Out string
	// Force replaces an existing Out; without it Build refuses.
	Force bool
	// Size is the volume's size in bytes (0: DefaultSize).
	Size int64

	// DaemonImage is the Docker daemon image (oci:DIR, docker-archive:TAR,
	// a registry reference or a local name of the image cache; "":
	// DefaultDaemonImage).
	DaemonImage string
	// DaemonPull says when a registry DaemonImage is fetched ("":
	// image.PullMissing: a name the cache knows needs no network).
	DaemonPull image.PullPolicy
	// DaemonArgs are extra dockerd flags.
	DaemonArgs []string

	// Loads are docker-archive tarballs (docker save) loaded into the
	// volume, in order.
	Loads []string
	// Pulls are registry references pulled on the host and loaded after
	// Loads, in order; REPO:TAG@sha256:… pins a digest.
	Pulls []string
	// Platform is the os/arch[/variant] Pulls resolve to ("": linux on
	// the host's architecture), with image.Add's rules and errors.
	Platform string
	// InsecureRegistries are registries (HOST[:PORT]) Pulls speak plain
	// HTTP to; loopback, *.local and private addresses always are.
	InsecureRegistries []string
	// Keychain supplies registry credentials (nil: authn.DefaultKeychain).
	Keychain authn.Keychain
	// Transport is the HTTP transport for registries (nil: the default).
	Transport http.RoundTripper

	// Rungv is the rungv binary ("": $GVX_RUNGV, then PATH).
	Rungv string
	// ReadyTimeout bounds the daemon's start (0: DefaultReadyTimeout).
	ReadyTimeout time.Duration
	// MemoryBytes is the memory the daemon's guest sees (0: the host's).
	MemoryBytes int64
	// Log receives progress lines (nil: none).
	Log io.Writer
}

// Summary describes a published golden volume.
type Summary struct {
	Volume         string  `json:"volume"`
	SizeBytes      int64   `json:"size_bytes"`
	UsedBytes      int64   `json:"used_bytes"`      // blocks in use × block size
	AllocatedBytes int64   `json:"allocated_bytes"` // host bytes the file takes (-1: unknown)
	Images         []Image `json:"images"`
	DaemonImage    string  `json:"daemon_image"`
	// DaemonDigest is the image cache's digest of the daemon image.
	DaemonDigest string  `json:"daemon_digest,omitempty"`
	Seconds      float64 `json:"seconds"`
}

// Build makes a golden /var/lib/docker volume: it creates a new ext4lite
// volume beside Out, runs the daemon image under the runtime (the rungv
// binary, through package gvx) with the volume at /var/lib/docker, loads
// each Loads tar and each Pulls image (pulled on the host), stops the
// daemon with SIGTERM so it flushes its state, compacts the volume and
// publishes it as Out (fsync, rename, fsync of the directory). If anything
// fails, no Out and no temporary file are left, and an existing Out is
// untouched.
//
// The daemon image is resolved on the host first, into the default image
// cache (image.DefaultCacheDir, the one rungv reads) under DaemonPull, so
// a local name the cache knows needs no network. Its entrypoint starts the
// daemon when it is a known daemon command (dind.IsDaemonCommand:
// dockerd-entrypoint.sh or dockerd, as docker:dind's), else
// dockerd-entrypoint.sh from PATH; either way dockerd gets the flags the
// Sentry needs (dind.Args, as rungv run adds them), DaemonArgs, and
// --host=unix:///var/run/docker.sock unless DaemonArgs name a host.
func Build(ctx context.Context, o Options) (*Summary, error) {
	start := time.Now()
	b, err := newBuilder(&o)
	if err != nil {
		return nil, err
	}
	sum, err := b.run(ctx)
	if err != nil {
		return nil, fmt.Errorf("build-golden: %w", err)
	}
	sum.Seconds = time.Since(start).Seconds()
	return sum, nil
}

// builder is one Build's checked options.
type builder struct {
	o      *Options
	out    string
	size   int64
	pulls  []*pullSpec
	puller *puller
	log    io.Writer
}

func newBuilder(o *Options) (*builder, error) {
	if o.Out == "" {
		return nil, fmt.Errorf("%w: no output file", ErrBadOption)
	}
	out, err := filepath.Abs(o.Out)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadOption, o.Out, err)
	}
	b := &builder{o: o, out: out, size: o.Size, log: o.Log}
	if b.size == 0 {
		b.size = DefaultSize
	}
	if b.size < 0 {
		return nil, fmt.Errorf("%w: size %d", ErrBadOption, o.Size)
	}
	if b.log == nil {
		b.log = io.Discard
	}
	if o.Platform != "" {
		if _, err := image.ParsePlatform(o.Platform); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadOption, err)
		}
	}
	if _, err := image.ParsePullPolicy(string(o.DaemonPull)); err != nil {
		return nil, fmt.Errorf("%w: daemon image: %w", ErrBadOption, err)
	}
	for _, r := range o.Pulls {
		p, err := parsePull(r)
		if err != nil {
			return nil, err
		}
		b.pulls = append(b.pulls, p)
	}
	b.puller = &puller{log: b.log, opts: image.Options{Platform: o.Platform, InsecureRegistries: o.InsecureRegistries,
		Keychain: o.Keychain, Transport: o.Transport}}
	if _, err := os.Lstat(out); err == nil && !o.Force {
		return nil, fmt.Errorf("%w: %s (set Force, or --force, to replace it)", ErrExists, out)
	}
	return b, nil
}

func (b *builder) daemonImage() string {
	if b.o.DaemonImage == "" {
		return DefaultDaemonImage
	}
	return b.o.DaemonImage
}

// run resolves the daemon image, pulls, builds the volume under a
// temporary name next to out and publishes it; on any error the temporary
// file is removed, and the pulled archives always are.
func (b *builder) run(ctx context.Context) (sum *Summary, err error) {
	daemon, err := b.resolveDaemon(ctx)
	if err != nil {
		return nil, err
	}
	pullDir, ps, err := b.puller.pullAll(ctx, b.pulls, b.out)
	if err != nil {
		return nil, err
	}
	if pullDir != "" {
		defer os.RemoveAll(pullDir)
	}
	loads := append([]string(nil), b.o.Loads...)
	for _, p := range ps {
		loads = append(loads, p.path)
	}
	tmp := durable.TempName(b.out) // ext4lite.Create makes it exclusively
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	v, err := ext4lite.Create(tmp, b.size, &ext4lite.CreateOptions{Label: "gvx-golden"})
	if err != nil {
		return nil, err
	}
	if err := v.Close(); err != nil {
		return nil, err
	}
	fmt.Fprintf(b.log, "created %s volume; starting the daemon (%s: %s)\n", units.FormatSize(b.size), b.daemonImage(), strings.Join(daemon.command, " "))

	rep, err := b.runDaemon(ctx, daemon, tmp, loads)
	if err != nil {
		return nil, err
	}
	if err := annotate(rep.images, ps); err != nil {
		return nil, err
	}

	fmt.Fprintln(b.log, "compacting")
	v, err = ext4lite.Open(tmp, nil)
	if err != nil {
		return nil, fmt.Errorf("reopen the volume the daemon wrote: %w", err)
	}
	st, err := v.Compact()
	if cerr := v.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("compact: %w", err)
	}
	if err := durable.Publish(tmp, b.out, durable.Options{}); err != nil {
		return nil, err
	}
	return &Summary{
		Volume: b.out, SizeBytes: b.size, UsedBytes: st.UsedBytes, AllocatedBytes: st.AllocatedAfter,
		Images: rep.images, DaemonImage: b.daemonImage(), DaemonDigest: daemon.digest,
	}, nil
}

// daemon is the resolved daemon image.
type daemon struct {
	digest  string   // the cache's digest
	command []string // what starts dockerd, before its flags
}

// resolveDaemon resolves the daemon image into the default image cache
// under the pull policy and picks the command that starts its daemon.
func (b *builder) resolveDaemon(ctx context.Context) (*daemon, error) {
	ref := b.daemonImage()
	fail := func(err error) error { return fmt.Errorf("daemon image %s: %w", ref, err) }
	dir, err := image.DefaultCacheDir()
	if err != nil {
		return nil, fail(fmt.Errorf("no image cache directory: %w (set GVX_CACHE_DIR)", err))
	}
	c, err := cache.Open(dir)
	if err != nil {
		return nil, fail(fmt.Errorf("%w (set GVX_CACHE_DIR to a directory of yours)", err))
	}
	res, err := image.Get(ctx, c, ref, b.o.DaemonPull, image.Options{})
	if errors.Is(err, fs.ErrPermission) && b.o.DaemonPull != image.PullAlways {
		// A shared cache this user may read but not fill: a name it
		// knows still resolves (rungv reads it the same way).
		if r, lerr := image.Lookup(c, ref, ""); lerr == nil {
			res, err = r, nil
		}
	}
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			err = fmt.Errorf("%w (the image cache %s is not writable: set GVX_CACHE_DIR to a directory of yours)", err, dir)
		}
		return nil, fail(err)
	}
	cfg, err := image.ReadConfig(res.Config)
	if err != nil {
		return nil, fail(err)
	}
	return &daemon{digest: res.Digest, command: daemonCommand(cfg)}, nil
}

// daemonCommand is the image's own entrypoint (with a Cmd of flags) when
// it is a known daemon command, as docker:dind's dockerd-entrypoint.sh is;
// else dockerd-entrypoint.sh from PATH.
func daemonCommand(cfg *image.Config) []string {
	if len(cfg.Entrypoint) > 0 && dind.IsDaemonCommand(cfg.Entrypoint[0]) {
		cmd := append([]string{}, cfg.Entrypoint...)
		for _, a := range cfg.Cmd {
			if !strings.HasPrefix(a, "-") {
				return cmd // a Cmd that is a program, not flags: not ours to run
			}
		}
		return append(cmd, cfg.Cmd...)
	}
	return []string{"dockerd-entrypoint.sh"}
}

// runDaemon runs the daemon image on the volume with the guest script,
// loading the docker-archives loads, and returns what the guest reported,
// or why it failed. The guest has no network.
func (b *builder) runDaemon(ctx context.Context, d *daemon, vol string, loads []string) (*report, error) {
	cfg := gvx.Config{
		Rungv:         b.o.Rungv,
		OCIImage:      b.daemonImage(),
		Entrypoint:    []string{"sh", "-c"},
		EntrypointSet: true,
		Envv:          []string{"DOCKER_TLS_CERTDIR="},
		NetRaw:        true,
		AllowSUID:     true,
		Mounts:        []gvx.Mount{{Kind: gvx.MountVolume, ImagePath: vol, GuestPath: "/var/lib/docker"}},
		Resources:     gvx.Resources{MemoryBytes: b.o.MemoryBytes},
	}
	// Each tar itself (never its directory) is bind-mounted read-only;
	// the guest loads /gvx-golden/load/N/NAME.
	var guestLoads []string
	for i, l := range loads {
		abs, err := filepath.Abs(l)
		if err != nil {
			return nil, err
		}
		if st, err := os.Stat(abs); err != nil {
			return nil, fmt.Errorf("load: %w", err)
		} else if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("load %s: not a regular file", l)
		}
		g := fmt.Sprintf("/gvx-golden/load/%d/%s", i, filepath.Base(abs))
		cfg.Mounts = append(cfg.Mounts, gvx.Mount{Kind: gvx.MountBind, ImagePath: abs, GuestPath: g, ReadOnly: true})
		guestLoads = append(guestLoads, g)
	}
	ready := b.o.ReadyTimeout
	if ready <= 0 {
		ready = DefaultReadyTimeout
	}
	cfg.Cmd = []string{guestScript(d.command, guestLoads, b.o.DaemonArgs, int(ready.Seconds()))}

	pr, pw := io.Pipe()
	cfg.Stdout = pw
	var errTail tailWriter
	cfg.Stderr = &errTail
	sb, err := gvx.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer sb.Close()
	start := time.Now()
	repc := make(chan *report, 1)
	go func() {
		repc <- parseGuest(pr, logProgress(b.log, start))
	}()
	code, err := sb.Run(ctx)
	pw.Close()
	rep := <-repc
	switch {
	case err != nil:
		return nil, fmt.Errorf("run the daemon image: %w%s", err, errTail.suffix())
	case rep.fail != "":
		return nil, fmt.Errorf("%s:\n%s", termsafe.String(rep.fail), guestLines(rep.tail))
	case !rep.ready:
		return nil, fmt.Errorf("the daemon image exited with status %d before its daemon answered (does it have %s and docker?)%s", code, d.command[0], errTail.suffix())
	case !rep.stopped || rep.status != 0 || code != 0:
		return nil, fmt.Errorf("the daemon did not stop cleanly (status %d, guest exit %d):\n%s", rep.status, code, guestLines(rep.tail))
	}
	return rep, nil
}

// tailWriter keeps the last 4 KiB written to it (the guest's stderr).
type tailWriter struct{ b []byte }

func (t *tailWriter) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4<<10 {
		t.b = t.b[len(t.b)-4<<10:]
	}
	return len(p), nil
}

func (t *tailWriter) suffix() string {
	s := strings.TrimSpace(string(t.b))
	if s == "" {
		return ""
	}
	return "; its stderr ends:\n" + guestLines(strings.Split(s, "\n"))
}

// logProgress writes what parseGuest reports to log, one line each. What
// the guest wrote (a load's argument, its exit status, every line of the
// docker CLI's and the daemon's output) is rendered by termsafe: a line of
// the guest's with an escape sequence or a carriage return in it cannot
// drive the reader's terminal or pass for one of Build's own.
func logProgress(log io.Writer, start time.Time) func(kind, arg string) {
	return func(kind, arg string) {
		switch kind {
		case "ready":
			fmt.Fprintf(log, "daemon ready in %.1fs\n", time.Since(start).Seconds())
		case "load":
			fmt.Fprintf(log, "%s %s\n", kind, termsafe.String(arg))
		case "stopped":
			fmt.Fprintf(log, "daemon stopped (status %s)\n", termsafe.String(arg))
		case "output":
			fmt.Fprintf(log, "  %s\n", termsafe.String(arg))
		}
	}
}

// guestLines joins lines of the guest's output for an error, each
// rendered by termsafe.
func guestLines(lines []string) string {
	q := make([]string, len(lines))
	for i, l := range lines {
		q[i] = termsafe.String(l)
	}
	return strings.Join(q, "\n")
}
