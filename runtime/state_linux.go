package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/runtime/cgroup"
	episodenet "z.gfire.dev/gvx/runtime/net"
)

// The episode's private state directory: $TMPDIR/rungv-<id>, mode 0700,
// holding runsc's state, the bundle, the volume binds and what a later
// start needs to clean up after an episode whose host side and supervisor
// were both killed (a job manager's cgroup kill, the OOM killer):
//
//	lock          flock'd (exclusive) for as long as the host side or the
//	              supervisor lives; free means the episode is dead
//	sockets.json  the -p unix: socket files it created (episodenet.Socket)
//	cgroups.json  its host cgroup directories
//
// Every Run first sweeps its TMPDIR: a rungv-* directory of the caller's
// whose lock is free is cleaned up (sockets still the same inode, empty
// cgroups, the directory). A directory is made as .rungv-new-*, locked, then
// renamed, so a sweeper never meets a live episode's directory unlocked.

const (
	stateLock    = "lock"
	stateSockets = "sockets.json"
	stateCgroups = "cgroups.json"
	statePrefix  = "rungv-"
	stateNew     = ".rungv-new-"
)

// newStateDir makes and locks the state directory of episode id. The
// returned lock must stay open (and be inherited by the supervisor) for
// the episode's life.
func newStateDir(id string) (string, *os.File, error) {
	tmp, err := os.MkdirTemp("", stateNew)
	if err != nil {
		return "", nil, err
	}
	lock, err := os.OpenFile(filepath.Join(tmp, stateLock), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		err = unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	}
	dir := filepath.Join(filepath.Dir(tmp), statePrefix+id)
	if err == nil {
		err = os.Rename(tmp, dir)
	}
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		os.RemoveAll(tmp)
		return "", nil, err
	}
	return dir, lock, nil
}

// writeStateJSON records v in the state directory for a later sweep,
// atomically (a temporary file renamed over it): a kill mid-write leaves
// the previous record, never half a list.
func writeStateJSON(state, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := filepath.Join(state, "."+name+".new")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(state, name))
}

// sweepStale cleans up after dead episodes of this user in $TMPDIR (what
// their records name: GC without orphans). It never fails: what it cannot
// remove stays for the next one.
func sweepStale() {
	GC(GCOptions{})
}

// GCOptions are what GC looks at.
type GCOptions struct {
	// DryRun lists without removing anything.
	DryRun bool
	// TempDir is where the state directories are ("": os.TempDir(), as
	// Run uses).
	TempDir string
	// Orphans also looks for empty gvx-* cgroups that no record names
	// (see GC).
	Orphans bool
}

// GCEntry is one thing a dead episode left behind.
type GCEntry struct {
	// Kind is "state" (a state directory), "socket" (a published unix
	// socket), "cgroup" (recorded in a state directory) or
	// "orphan-cgroup" (an empty gvx-* cgroup no record names).
	Kind string `json:"kind"`
	Path string `json:"path"`
	// Episode is the episode's ID, where known.
	Episode string `json:"episode,omitempty"`
	// Removed: it is gone (false with DryRun, or with Error).
	Removed bool `json:"removed"`
	// Error says why it was left (it was not removed).
	Error string `json:"error,omitempty"`
}

// orphanAge is how old an empty gvx-* cgroup no record names must be
// before GC removes it: a live episode's, made a moment ago, may be empty
// until its first process moves in (an episode run with another TMPDIR,
// whose lock GC cannot see); once in, its processes stay until the end.
const orphanAge = time.Minute

// sweepCgroupWait bounds how long one GC waits, in all, for the cgroups
// of dead episodes to let go of their dying tasks (a SIGKILLed host
// side's sandbox dies of its Pdeathsig a moment later).
const sweepCgroupWait = 2 * time.Second

// GC finds what dead episodes of this user left in o.TempDir — the state
// directories whose lock is free, and what their records name: published
// sockets (still the same inode) and host cgroups — and removes it
// (unless o.DryRun). A recorded cgroup is removed only if it is a
// directory named gvx-<the episode's ID> on a cgroup filesystem under one
// of its mounts: a record cannot make GC remove anything else. A state
// directory whose cgroups cannot be removed yet (tasks still in them)
// stays, with its record, for the next GC.
//
// With o.Orphans it also removes empty cgroups named gvx-<ID> (and the
// probe's gvx-info-probe-<PID>) under the cgroup mounts that no record
// names: ones this user owns (root: any), with no process in them, no
// child, older than a minute, and not of a live episode in o.TempDir.
// Every start runs GC without orphans (sweepStale).
func GC(o GCOptions) []GCEntry {
	tmp := o.TempDir
	if tmp == "" {
		tmp = os.TempDir()
	}
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return nil
	}
	g := &gc{dry: o.DryRun, deadline: time.Now().Add(sweepCgroupWait), live: map[string]bool{}, named: map[string]bool{}}
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, statePrefix):
			g.state(filepath.Join(tmp, name))
		case strings.HasPrefix(name, stateNew):
			// Killed between mkdir and rename (a few microseconds): old.
			p := filepath.Join(tmp, name)
			if st, err := os.Lstat(p); err == nil && ownedDir(st) && time.Since(st.ModTime()) > time.Minute {
				g.add(GCEntry{Kind: "state", Path: p}, func() error { return os.RemoveAll(p) })
			}
		}
	}
	if o.Orphans {
		g.orphans()
	}
	return g.out
}

// gc is one GC's work.
type gc struct {
	dry      bool
	deadline time.Time
	mounts   map[string]string
	live     map[string]bool // IDs of live episodes (their lock is held)
	named    map[string]bool // cgroup paths a dead episode's record names
	out      []GCEntry
}

// add lists e and, unless dry, removes it with rm.
func (g *gc) add(e GCEntry, rm func() error) bool {
	if !g.dry && e.Error == "" {
		if err := rm(); err != nil && !errors.Is(err, fs.ErrNotExist) {
			e.Error = err.Error()
		} else {
			e.Removed = true
		}
	}
	g.out = append(g.out, e)
	return e.Removed
}

func ownedDir(st os.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && st.IsDir() && int(sys.Uid) == os.Getuid()
}

// state cleans up dir if it is a dead episode's.
func (g *gc) state(dir string) {
	st, err := os.Lstat(dir)
	if err != nil || !ownedDir(st) {
		return
	}
	id := strings.TrimPrefix(filepath.Base(dir), statePrefix)
	lock, err := os.OpenFile(filepath.Join(dir, stateLock), os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return // not a state directory this version made
	}
	defer lock.Close()
	if unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		g.live[id] = true
		return // alive
	}
	if b, err := readRecord(dir, stateSockets); err == nil {
		for _, s := range episodenet.ParseSockets(string(b)) {
			if _, err := os.Lstat(s.Path); err == nil {
				g.add(GCEntry{Kind: "socket", Path: s.Path, Episode: id}, func() error {
					episodenet.RemoveSockets([]episodenet.Socket{s})
					return nil
				})
			}
		}
	}
	keep := false
	var cgs []string
	if b, err := readRecord(dir, stateCgroups); err == nil && json.Unmarshal(b, &cgs) == nil {
		for _, d := range cgs {
			e := GCEntry{Kind: "cgroup", Path: d, Episode: id}
			if err := g.checkEpisodeCgroup(d, id); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue // never made, or removed already
				}
				e.Error = err.Error()
				g.out = append(g.out, e)
				continue
			}
			g.named[d] = true
			if !g.add(e, func() error { return removeCgroupBy(d, g.deadline) }) && !g.dry {
				keep = true // try again next time: the record stays
			}
		}
	}
	if keep {
		return
	}
	g.add(GCEntry{Kind: "state", Path: dir, Episode: id}, func() error { return os.RemoveAll(dir) })
}

// readRecord reads the record name of state directory dir: a regular
// file of this user's, never through a symbolic link, at most 1 MiB.
func readRecord(dir, name string) ([]byte, error) {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Getuid() {
		return nil, fmt.Errorf("%s: not a regular file of uid %d", f.Name(), os.Getuid())
	}
	return io.ReadAll(io.LimitReader(f, 1<<20))
}

// episodeID is the form of the IDs Run gives episodes (12 hex digits).
var episodeID = regexp.MustCompile(`^[0-9a-f]{12}$`)

// checkEpisodeCgroup tells whether d may be removed as episode id's
// cgroup: an absolute, clean path named gvx-<id>, strictly under one of
// the cgroup mounts, that is a directory on a cgroup filesystem. An error
// wrapping fs.ErrNotExist means it is not there.
func (g *gc) checkEpisodeCgroup(d, id string) error {
	if !episodeID.MatchString(id) || filepath.Base(d) != "gvx-"+id || !filepath.IsAbs(d) || filepath.Clean(d) != d {
		return fmt.Errorf("recorded cgroup %s is not named gvx-%s: left alone", d, id)
	}
	if g.mounts == nil {
		g.mounts, _ = cgroup.Mounts()
	}
	if !underCgroupMount(d, g.mounts) {
		return fmt.Errorf("recorded cgroup %s is not under a cgroup mount: left alone", d)
	}
	return isCgroupDir(d)
}

// underCgroupMount tells whether d is strictly below one of mounts.
func underCgroupMount(d string, mounts map[string]string) bool {
	for _, m := range mounts {
		if m != "" && strings.HasPrefix(d, strings.TrimSuffix(m, "/")+"/") {
			return true
		}
	}
	return false
}

// isCgroupDir: d is a directory (not a link) on a cgroup v1 or v2
// filesystem.
func isCgroupDir(d string) error {
	st, err := os.Lstat(d)
	if err != nil {
		return err
	}
	var fst unix.Statfs_t
	if !st.IsDir() || unix.Statfs(d, &fst) != nil || (fst.Type != unix.CGROUP_SUPER_MAGIC && fst.Type != unix.CGROUP2_SUPER_MAGIC) {
		return fmt.Errorf("%s is not a cgroup directory: left alone", d)
	}
	return nil
}

// removeCgroupBy removes the cgroup d, waiting until deadline at most for
// its dying tasks to go.
func removeCgroupBy(d string, deadline time.Time) error {
	wait := time.Millisecond
	for {
		err := os.Remove(d)
		if err == nil || errors.Is(err, fs.ErrNotExist) || time.Now().After(deadline) {
			if errors.Is(err, syscall.EBUSY) {
				return fmt.Errorf("%s still has tasks: left for the next rungv gc", d)
			}
			return err
		}
		time.Sleep(wait)
		if wait < 50*time.Millisecond {
			wait *= 2
		}
	}
}

// orphanCgroup is the form of the cgroups rungv makes: an episode's, and
// rungv info's probe.
var orphanCgroup = regexp.MustCompile(`^gvx-([0-9a-f]{12}|info-probe-[0-9]+)$`)

// orphans lists (and removes) the empty gvx-* cgroups no record names.
func (g *gc) orphans() {
	if g.mounts == nil {
		g.mounts, _ = cgroup.Mounts()
	}
	seen := map[string]bool{}
	for _, m := range g.mounts {
		if m == "" || seen[m] {
			continue
		}
		seen[m] = true
		n := 0
		_ = filepath.WalkDir(m, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if n++; n > 100000 || strings.Count(strings.TrimPrefix(p, m), "/") > 8 {
				return filepath.SkipDir
			}
			name := d.Name()
			if !orphanCgroup.MatchString(name) {
				return nil
			}
			if id := strings.TrimPrefix(name, "gvx-"); !g.named[p] && !g.live[id] && orphanRemovable(p) {
				g.add(GCEntry{Kind: "orphan-cgroup", Path: p}, func() error { return os.Remove(p) })
			}
			return filepath.SkipDir
		})
	}
}

// orphanRemovable: the cgroup p is this user's to remove (root: any),
// has no process and no child cgroup, and is older than orphanAge.
func orphanRemovable(p string) bool {
	st, err := os.Lstat(p)
	if err != nil || !st.IsDir() || time.Since(st.ModTime()) < orphanAge {
		return false
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || (os.Getuid() != 0 && int(sys.Uid) != os.Getuid()) {
		return false
	}
	procs, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
	if err != nil || len(bytes.TrimSpace(procs)) > 0 {
		return false
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if e.IsDir() {
			return false
		}
	}
	return true
}
