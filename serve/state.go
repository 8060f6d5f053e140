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
}

// writeRecord publishes rec in dir by temp file and rename.
func writeRecord(dir string, rec *record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, recordFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("episode record: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, recordFile)); err != nil {
		return fmt.Errorf("episode record: %w", err)
	}
	return nil
}

// maxRecord bounds a record's size (the state dir is ours, but a record
// may be truncated by a crash).
const maxRecord = 64 << 10

// reap tears down what a dead predecessor left in dir (StateDir/ep): for
// each episode directory, the rungv process its record names, if it still
// runs (same PID and start time), is killed and waited for; then the
// directory — clone, sockets, record — is removed. It returns how many
// episode directories it reaped. The caller holds the state dir's lock, so
// no live server owns them.
func reap(dir string, logf func(string, ...any)) (int, error) {
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
		if rec, err := readRecord(p); err == nil && rec.RungvPID > 0 {
			if err := killIfSame(rec.RungvPID, rec.RungvStart); err != nil {
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

func readRecord(dir string) (*record, error) {
	f, err := os.Open(filepath.Join(dir, recordFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rec record
	if err := json.NewDecoder(io.LimitReader(f, maxRecord)).Decode(&rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

// killIfSame SIGKILLs pid if it is still the process that started at
// start, and waits (up to 10 s) for it to be gone.
func killIfSame(pid int, start uint64) error {
	if start == 0 || procStart(pid) != start {
		return nil // gone, or the PID is another process now
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill rungv %d: %w", pid, err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if procStart(pid) != start {
			return nil
		}
	}
	return fmt.Errorf("rungv %d did not die after SIGKILL within 10s", pid)
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
