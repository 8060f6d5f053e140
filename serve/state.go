package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"z.gfire.dev/gvx/internal/durable"
	"z.gfire.dev/gvx/internal/privdir"
)

// record is an episode's StateDir/ep/ID/record.json: what a successor
// needs to reap the episode if this server dies without tearing it down.
// It is written when the episode's directory is made, and again once its
// rungv process exists.
type record struct {
	ID        string    `json:"id"`
	ServerPID int       `json:"server_pid"`
	Created   time.Time `json:"created"`
	// RungvPID is the rungv process running the episode, and RungvStart
	// its start time (/proc/PID/stat's starttime), so a reused PID is
	// never killed.
	RungvPID   int    `json:"rungv_pid,omitempty"`
	RungvStart uint64 `json:"rungv_start,omitempty"`
	// RungvExe is the binary that process runs (/proc/PID/exe when it
	// started), RungvDev and RungvIno that file's device and inode: the
	// reaper kills only a process that runs this file (or the server's
	// own rungv).
	RungvExe string `json:"rungv_exe,omitempty"`
	RungvDev uint64 `json:"rungv_dev,omitempty"`
	RungvIno uint64 `json:"rungv_ino,omitempty"`
}

// writeRecord publishes rec in dir by temp file and rename
// (durable.WriteFile, without fsync: the state dir does not outlive a
// reboot that matters, and a crash leaves the old record or the new one).
func writeRecord(dir string, rec *record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := durable.WriteFile(filepath.Join(dir, recordFile), 0o600, durable.Options{NoSync: true}, func(f *os.File) error {
		_, err := f.Write(b)
		return err
	}); err != nil {
		return fmt.Errorf("episode record: %w", err)
	}
	return nil
}

// maxRecord bounds a record's size (the state dir is ours, but a record
// may be truncated by a crash).
const maxRecord = 64 << 10

// errUntrusted marks an episode directory or record someone else could
// have written: the reaper neither believes nor removes it.
var errUntrusted = errors.New("not trusted")

// reap tears down what a dead predecessor left in dir (StateDir/ep, which
// the caller checked is private): for each episode directory, the rungv
// process its record names, if it still runs (same PID, start time and
// executable: the record's rungv or rungv, the server's), is killed and
// waited for; then the directory — clone, sockets, record — is removed.
// An episode directory or record that is not the server user's and
// writable by it alone is left alone, and reported: it was not written by
// a server, and nothing it names is killed. It returns how many episode
// directories it reaped. The caller holds the state dir's lock, so no
// live server owns them.
func reap(dir, rungv string, logf func(string, ...any)) (int, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("serve: reap %s: %w", dir, err)
	}
	n := 0
	var errs []error
	for _, ent := range ents {
		p := filepath.Join(dir, ent.Name())
		if !ent.IsDir() {
			continue
		}
		rec, err := readRecord(p)
		if errors.Is(err, errUntrusted) {
			errs = append(errs, fmt.Errorf("serve: reap: %w; a server did not write it: nothing it names is killed; remove it", err))
			continue
		}
		if err == nil && rec.RungvPID > 0 {
			if err := killIfSame(rec, rungv, logf); err != nil {
				errs = append(errs, fmt.Errorf("serve: reap episode %s: %w", ent.Name(), err))
				continue
			}
		}
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, fmt.Errorf("serve: reap %s: %w", p, err))
			continue
		}
		logf("reaped episode %s left by a previous server", ent.Name())
		n++
	}
	return n, errors.Join(errs...)
}

// readRecord reads dir's record. The directory must be private
// (privdir.Check) and the record a regular file of the server's user that
// no one else may write, opened without following a symlink; else the
// error wraps errUntrusted.
func readRecord(dir string) (*record, error) {
	if err := privdir.Check(dir); err != nil {
		var pe *privdir.Error
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("episode dir: %w (%w)", err, errUntrusted)
		}
		return nil, err
	}
	name := filepath.Join(dir, recordFile)
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("episode record %s is a symlink (%w)", name, errUntrusted)
		}
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !st.Mode().IsRegular() || !ok || int(sys.Uid) != os.Geteuid() || st.Mode().Perm()&0o022 != 0 {
		uid := -1
		if ok {
			uid = int(sys.Uid)
		}
		return nil, fmt.Errorf("episode record %s is owned by uid %d, mode %v: it must be a file of uid %d's not writable by others (%w)", name, uid, st.Mode(), os.Geteuid(), errUntrusted)
	}
	var rec record
	if err := json.NewDecoder(io.LimitReader(f, maxRecord)).Decode(&rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

// procStart is the start time of process pid (/proc/PID/stat field 22, in
// clock ticks since boot), or 0 if there is no such process. A zombie
// counts as gone.
func procStart(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}
