package runtime

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/image"
	"z.gfire.dev/gvx/reflink"
	"z.gfire.dev/gvx/runtime/cgroup"
	"z.gfire.dev/gvx/runtime/egress"
	"z.gfire.dev/gvx/runtime/lockdown"
	episodenet "z.gfire.dev/gvx/runtime/net"
)

// HostInfo is what this host allows rungv and what rungv will use on it
// (rungv info).
type HostInfo struct {
	UID int `json:"uid"`
	GID int `json:"gid"`
	// Isolation is the isolation probe: what --isolation auto picks, and
	// why.
	Isolation HostIsolation `json:"isolation"`
	// Platform is gVisor's platform (systrap), and how systrap's stubs
	// will wait for the Sentry here: "seccomp user notification" or
	// "futex syscall loop" (where a listener cannot be installed, as in a
	// nested Sentry).
	Platform     string `json:"platform"`
	SystrapMode  string `json:"systrap_mode"`
	PtraceScope  int    `json:"yama_ptrace_scope"` // -1: no Yama
	PlatformNote string `json:"platform_note,omitempty"`
	// Landlock is the kernel's Landlock ABI (0: none).
	Landlock int `json:"landlock_abi"`
	// Cgroup says which of -m/--cpus/--pids-limit a host cgroup would
	// enforce for this user: "cgroup v1 (memory, cpu, pids)", or "none
	// (…)" with the reason.
	Cgroup string `json:"cgroup"`
	// NAT says whether --network nat can start: it reads the host's
	// addresses for the egress policy, and forwards DNS to DNS.
	NAT     string `json:"nat"`
	DNS     string `json:"nat_dns,omitempty"`
	Cache   string `json:"image_cache"`
	CacheOK string `json:"image_cache_status"`
	// Reflink is whether Dir's filesystem clones files in O(1) (reset).
	Dir     string `json:"dir,omitempty"`
	Reflink string `json:"reflink,omitempty"`
	// Leftovers counts what dead episodes of this user left (state
	// directories, sockets, cgroups) that rungv gc would remove.
	Leftovers int `json:"leftovers"`
	// GVisorPatches is gvx's gVisor patch series: which this binary has,
	// and what it lacks without the others (docs/gvisor-patches.md).
	GVisorPatches []GVisorPatch `json:"gvisor_patches"`
	// Nested is whether this build runs episodes inside a gVisor sandbox
	// (gVisor patch 0004-nested-fault-access), and whether this host is
	// one.
	Nested NestedMode `json:"nested_mode"`
}

// Info probes the host. dir, if not "", is where volumes would live (its
// reflink support is tried for real); cacheDir "" means the default.
func Info(dir, cacheDir string) HostInfo {
	h := HostInfo{UID: os.Getuid(), GID: os.Getgid(), Isolation: ProbeIsolation(), Platform: "systrap", Landlock: lockdown.LandlockABI(), PtraceScope: -1}
	h.SystrapMode = systrapMode()
	h.GVisorPatches = GVisorPatches()
	h.Nested = nestedInfo(h.Isolation.InGVisor)
	if b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope"); err == nil {
		h.PtraceScope, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		if h.PtraceScope >= 2 {
			h.PlatformNote = "Yama ptrace_scope " + strconv.Itoa(h.PtraceScope) + " forbids the ptrace systrap needs to start its stubs: set kernel.yama.ptrace_scope to 1 or less"
		}
	}
	cg, err := cgroup.New("info-probe-"+strconv.Itoa(os.Getpid()), 1<<30, 1, 1024, nil)
	switch {
	case err != nil:
		h.Cgroup = "none (" + err.Error() + ")"
	case cg == nil:
		h.Cgroup = "none (not root, no delegated cgroup v2 subtree): -m/--cpus need --limits best-effort"
	default:
		h.Cgroup = cg.Desc
		cg.Remove()
	}
	if _, err := egress.HostAddrs(); err != nil {
		h.NAT = "unavailable: cannot read the host's addresses (" + err.Error() + ")"
	} else {
		h.NAT = "available"
		if dns := os.Getenv(episodenet.DNSEnv); dns != "" {
			h.DNS = dns
		} else if ns := episodenet.FirstNameserver("/etc/resolv.conf"); ns != "" {
			h.DNS = ns + ":53"
		} else {
			h.DNS = "none (no nameserver in /etc/resolv.conf): guests cannot resolve names"
		}
	}
	h.Leftovers = len(GC(GCOptions{DryRun: true, Orphans: true}))
	if cacheDir == "" {
		cacheDir, _ = image.DefaultCacheDir()
	}
	h.Cache = cacheDir
	h.CacheOK = cacheStatus(cacheDir)
	if dir != "" {
		h.Dir = dir
		ok, err := reflink.Supported(dir)
		switch {
		case err != nil:
			h.Reflink = "unknown: " + err.Error()
		case ok:
			h.Reflink = "yes: resets are O(1) clones"
		default:
			h.Reflink = "no: clones are sparse copies (--clone auto; use XFS with reflink=1 or Btrfs for O(1) resets)"
		}
	}
	return h
}

// cacheStatus says whether episodes can use the image cache at dir.
func cacheStatus(dir string) string {
	d := dir
	for d != "/" && d != "." {
		if _, err := os.Stat(d); err == nil {
			break
		}
		d = filepath.Dir(d)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(d, &st); err == nil && st.Flags&unix.ST_NOEXEC != 0 {
		return "unusable: " + d + " is on a noexec mount (the Sentry runs the image's programs from the cache): give --cache-dir on an exec mount"
	}
	if unix.Access(d, unix.W_OK) != nil {
		return "read-only for this user: names it has are used; new images go to each episode's scratch cache"
	}
	return "ok"
}

// systrapMode tells how systrap's stubs will wait here: it probes
// seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER) with
// no program, as systrap does: EFAULT means the kernel would take one.
func systrapMode() string {
	_, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, 0)
	switch {
	case errors.Is(e, unix.EFAULT):
		return "seccomp user notification"
	case errors.Is(e, unix.EBUSY):
		return "futex syscall loop (a seccomp listener is already installed above rungv)"
	default:
		return "futex syscall loop (seccomp user notification refused: " + e.Error() + ")"
	}
}
