package volume

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/lisafs"
	"gvisor.dev/gvisor/pkg/log"
	"gvisor.dev/gvisor/pkg/seccomp"
	"gvisor.dev/gvisor/runsc/flag"
	"gvisor.dev/gvisor/runsc/fsgofer/extension"

	"z.gfire.dev/gvx/ext4lite"
)

// AnnotationPrefix + an index names one volume mount in the spec; the
// value is a Mount as JSON.
const AnnotationPrefix = "dev.gvx.volume."

// Mount is one volume mount as the runtime describes it to the gofer (and
// to Serve, on the seccomp-only path).
type Mount struct {
	Source   string `json:"src"`            // host path the gofer binds: the runtime's bind of the opened file
	Name     string `json:"name,omitempty"` // the caller's path of the file, for messages
	Target   string `json:"dst"`            // guest path (the spec mount's Destination)
	ReadOnly bool   `json:"ro,omitempty"`
	// MaxOpen bounds the FDs the Sentry may hold on the mount (0:
	// DefaultMaxOpen; see Conn.MaxOpen).
	MaxOpen int64 `json:"max_open,omitempty"`
	// NoHostSync: a guest fsync commits ext4lite's journal to the file
	// but does not flush the file to the host's disk (ext4lite's NoSync;
	// spec durability=episode). Not with ReadOnly.
	NoHostSync bool `json:"no_host_sync,omitempty"`
}

// Annotations returns the spec annotation that marks volume i for the
// gofer extension. The matching spec mount is a bind mount whose source is
// the volume file. The runtime gives the mount no gVisor mount hint: a hint
// with share=shared would stop the Sentry from memory-mapping files (it
// needs a host FD for that, and ext4lite has none to give), and
// share=container puts a memory overlay over the mount. The runtime runs
// runsc with --file-access-mounts=exclusive and --directfs=false instead
// (see runtime.volumeRunscFlags).
func Annotations(i int, v Mount) map[string]string {
	js, _ := json.Marshal(v)
	return map[string]string{AnnotationPrefix + strconv.Itoa(i): string(js)}
}

// mountsOf lists the volumes annotated in s, in annotation order.
func mountsOf(s *specs.Spec) ([]Mount, error) {
	var keys []string
	for k := range s.Annotations {
		if strings.HasPrefix(k, AnnotationPrefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([]Mount, 0, len(keys))
	for _, k := range keys {
		var v Mount
		if err := json.Unmarshal([]byte(s.Annotations[k]), &v); err != nil {
			return nil, fmt.Errorf("annotation %s: %w", k, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// Extension serves volume mounts in runsc's gofer. Register it (in an
// init function of the binary that embeds runsc) with Register.
type Extension struct {
	mu      sync.Mutex
	files   map[string]*os.File // by guest path, opened in PrepareGofer
	fdsFlag string              // "dst=fd;…" after a gofer re-exec
	// SyncEvery bounds how much a killed sandbox can lose.
	SyncEvery time.Duration
}

// goferRoot is where runsc's gofer assembles the container's root before it
// chroots into it.
const goferRoot = "/root"

var registerOnce sync.Once

// Register adds the extension to runsc's gofer.
func Register() {
	registerOnce.Do(func() {
		extension.Register(&Extension{SyncEvery: DefaultSyncEvery})
	})
}

// Name implements extension.Extension.
func (e *Extension) Name() string { return "gvx-ext4lite" }

const fdsFlagName = "gvx-volume-fds"

// SetFlags adds the flag that carries volume FDs across a gofer re-exec.
func (e *Extension) SetFlags(f *flag.FlagSet) {
	f.StringVar(&e.fdsFlag, fdsFlagName, "", "internal: volume FDs (guestpath=fd;…) opened before the gofer dropped privileges")
}

// PrepareGofer opens every volume file before the gofer chroots, drops
// capabilities and installs its seccomp filter.
func (e *Extension) PrepareGofer(ctx extension.GoferPrepareContext) (extension.GoferPrepareResult, error) {
	vols, err := mountsOf(ctx.Spec)
	if err != nil || len(vols) == 0 {
		return extension.GoferPrepareResult{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.files = map[string]*os.File{}
	var parts []string
	for _, v := range vols {
		flags := os.O_RDWR
		if v.ReadOnly {
			flags = os.O_RDONLY
		}
		// The gofer has bind-mounted the file at the destination in its
		// new root (/root, entered by chroot later). Nothing else is
		// opened: Source is the runtime's bind of the file it checked.
		f, err := os.OpenFile(filepath.Join(goferRoot, v.Target), flags|unix.O_NOFOLLOW, 0)
		if err != nil {
			return extension.GoferPrepareResult{}, fmt.Errorf("volume %s: %w", v.Target, err)
		}
		if _, err := unix.FcntlInt(f.Fd(), unix.F_SETFD, 0); err != nil { // kept across a re-exec
			return extension.GoferPrepareResult{}, err
		}
		e.files[v.Target] = f
		parts = append(parts, v.Target+"="+strconv.Itoa(int(f.Fd())))
	}
	return extension.GoferPrepareResult{FlagOverrides: map[string]string{fdsFlagName: strings.Join(parts, ";")}}, nil
}

// file returns the opened volume file for a guest path.
func (e *Extension) file(target string) *os.File {
	e.mu.Lock()
	defer e.mu.Unlock()
	if f := e.files[target]; f != nil {
		return f
	}
	for _, part := range strings.Split(e.fdsFlag, ";") {
		dst, fd, ok := strings.Cut(part, "=")
		if !ok || dst != target {
			continue
		}
		n, err := strconv.Atoi(fd)
		if err != nil {
			return nil
		}
		f := os.NewFile(uintptr(n), target)
		if e.files == nil {
			e.files = map[string]*os.File{}
		}
		e.files[target] = f
		return f
	}
	return nil
}

// TryHandleMount implements extension.Extension: it claims the spec mounts
// named by a volume annotation.
func (e *Extension) TryHandleMount(spec *specs.Spec, m *specs.Mount, mountPath string, readonly bool) (lisafs.ConnectionImpl, lisafs.ConnectionOpts, error) {
	if m == nil {
		return nil, lisafs.ConnectionOpts{}, nil
	}
	vols, err := mountsOf(spec)
	if err != nil {
		return nil, lisafs.ConnectionOpts{}, err
	}
	for _, v := range vols {
		if v.Target != m.Destination {
			continue
		}
		f := e.file(v.Target)
		if f == nil {
			return nil, lisafs.ConnectionOpts{}, fmt.Errorf("volume %s was not opened before the gofer locked down", v.Target)
		}
		if readonly {
			v.ReadOnly = true
		}
		// The gofer sees no host path (its root holds etc, proc and the
		// container's root only), so it cannot keep a stats file: it logs
		// the final counters to its runsc log (--debug-log) instead.
		return ServeStats(f, v, e.SyncEvery, nil, func(s Stats) {
			js, _ := json.Marshal(s)
			log.Infof("gvx-ext4lite: volume stats %s", js)
		})
	}
	return nil, lisafs.ConnectionOpts{}, nil
}

// Serve opens the ext4lite filesystem in f (the volume file, opened by
// the runtime) and returns the lisafs connection that serves it as v
// describes, and its options. The connection owns f: it syncs and closes
// the filesystem and f when the Sentry unmounts it. syncEvery bounds what
// a killed sandbox can lose. The gofer extension and the runtime's own
// in-process server (seccomp-only episodes, which have no gofer) both
// serve volumes through it.
func Serve(f *os.File, v Mount, syncEvery time.Duration) (lisafs.ConnectionImpl, lisafs.ConnectionOpts, error) {
	return ServeStats(f, v, syncEvery, nil, nil)
}

// ServeStats is Serve that also keeps the volume's request counters in
// the file stats (nil: none), which the connection owns: rewritten every
// 250 ms while they change and final at the volume's release (the file
// must be opened before any seccomp filter: only pwrite64 and ftruncate
// are used on it). final (nil: none) gets the final counters.
func ServeStats(f *os.File, v Mount, syncEvery time.Duration, stats *os.File, final func(Stats)) (lisafs.ConnectionImpl, lisafs.ConnectionOpts, error) {
	// A read-only mount writes nothing: NoHostSync changes nothing there
	// (the spec refuses the pair; runsc may still make a mount read-only).
	v.NoHostSync = v.NoHostSync && !v.ReadOnly
	fsys, err := ext4lite.OpenDevice(f, &ext4lite.Options{ReadOnly: v.ReadOnly, NoSync: v.NoHostSync})
	if err != nil {
		return nil, lisafs.ConnectionOpts{}, fmt.Errorf("volume %s (%s): %w", v.Target, v.Name, err)
	}
	vol := NewVolume(fsys, v.ReadOnly, syncEvery)
	vol.noHostSync = v.NoHostSync
	var sw *statsWriter
	if stats != nil {
		sw = startStats(vol, stats, v.Target)
	}
	conn := NewConn(vol, func() {
		_ = vol.Close()
		_ = f.Close()
		if sw != nil {
			sw.finish(vol)
		}
		if final != nil {
			s := vol.Stats()
			s.Target, s.Final = v.Target, true
			final(s)
		}
	})
	conn.MaxOpen = v.MaxOpen
	return conn, ConnectionOpts(v.ReadOnly), nil
}

// DefaultSyncEvery is how often a served volume with unsynced writes is
// synced.
const DefaultSyncEvery = 2 * time.Second

// SeccompRules implements extension.Extension: what ext4lite does on the
// volume file.
func (e *Extension) SeccompRules() seccomp.SyscallRules {
	rules := map[uintptr]seccomp.SyscallRule{}
	for _, nr := range []uintptr{
		unix.SYS_PREAD64, unix.SYS_PWRITE64, unix.SYS_FSYNC, unix.SYS_FDATASYNC,
		unix.SYS_FSTAT, unix.SYS_FTRUNCATE, unix.SYS_FALLOCATE, unix.SYS_LSEEK,
		unix.SYS_CLOSE,
	} {
		rules[nr] = seccomp.MatchAll{}
	}
	return seccomp.MakeSyscallRules(rules)
}
