package volume

import (
	"encoding/json"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"gvisor.dev/gvisor/pkg/lisafs"
)

// numMIDs bounds the lisafs message IDs counted: a fixed array indexed by
// the handler's own constant, never by anything the Sentry sends.
const numMIDs = int(lisafs.RenameAt2) + 1

// midNames names the counted messages in Stats' JSON.
var midNames = [numMIDs]string{
	lisafs.Mount: "Mount", lisafs.FStat: "FStat", lisafs.SetStat: "SetStat",
	lisafs.Walk: "Walk", lisafs.WalkStat: "WalkStat", lisafs.OpenAt: "OpenAt",
	lisafs.OpenCreateAt: "OpenCreateAt", lisafs.Close: "Close", lisafs.FSync: "FSync",
	lisafs.PWrite: "PWrite", lisafs.PRead: "PRead", lisafs.MkdirAt: "MkdirAt",
	lisafs.MknodAt: "MknodAt", lisafs.SymlinkAt: "SymlinkAt", lisafs.LinkAt: "LinkAt",
	lisafs.FStatFS: "FStatFS", lisafs.FAllocate: "FAllocate", lisafs.ReadLinkAt: "ReadLinkAt",
	lisafs.Flush: "Flush", lisafs.Connect: "Connect", lisafs.UnlinkAt: "UnlinkAt",
	lisafs.RenameAt: "RenameAt", lisafs.Getdents64: "Getdents64", lisafs.FGetXattr: "FGetXattr",
	lisafs.FSetXattr: "FSetXattr", lisafs.FListXattr: "FListXattr", lisafs.FRemoveXattr: "FRemoveXattr",
	lisafs.BindAt: "BindAt", lisafs.ConnectWithCreds: "ConnectWithCreds", lisafs.RenameAt2: "RenameAt2",
}

// counters is what a Volume counts of its requests: atomic adds on fixed
// fields, nothing allocated per request and nothing keyed by guest input.
type counters struct {
	req          [numMIDs]atomic.Uint64
	bytesRead    atomic.Uint64
	bytesWritten atomic.Uint64
	syncs        atomic.Uint64 // FSyncs that committed the journal
	syncsClean   atomic.Uint64 // FSyncs answered at once: nothing changed since the last sync
	syncNanos    atomic.Uint64 // time in those commits (journal and host flushes)
}

func (c *counters) count(m lisafs.MID) { c.req[m].Add(1) }

// Stats is a snapshot of a served volume's counters, as ServeStats
// writes it.
type Stats struct {
	Target string `json:"target"`
	// Requests counts the lisafs requests by message type (handler
	// calls: Close counts the FDs released, which the Sentry batches).
	Requests map[string]uint64 `json:"requests"`
	Total    uint64            `json:"total"`
	// BytesRead and BytesWritten are PRead's and PWrite's file data.
	BytesRead    uint64 `json:"bytes_read"`
	BytesWritten uint64 `json:"bytes_written"`
	// Syncs counts the FSyncs that committed the journal (and flushed
	// the host file unless HostSync is false); SyncsClean those answered
	// at once; SyncNanos the time the commits took.
	Syncs      uint64 `json:"syncs"`
	SyncsClean uint64 `json:"syncs_clean"`
	SyncNanos  uint64 `json:"sync_ns"`
	HostSync   bool   `json:"host_sync"`
	Final      bool   `json:"final"` // written at the volume's release
}

// Stats returns the volume's counters so far.
func (v *Volume) Stats() Stats {
	s := Stats{Requests: map[string]uint64{}, HostSync: !v.noHostSync}
	for i := range v.ctr.req {
		if n := v.ctr.req[i].Load(); n > 0 {
			s.Requests[midNames[i]] = n
			s.Total += n
		}
	}
	s.BytesRead, s.BytesWritten = v.ctr.bytesRead.Load(), v.ctr.bytesWritten.Load()
	s.Syncs, s.SyncsClean, s.SyncNanos = v.ctr.syncs.Load(), v.ctr.syncsClean.Load(), v.ctr.syncNanos.Load()
	return s
}

// statsWriter keeps a volume's counters in a file (ServeStats): rewritten in place with pwrite(2) and
// ftruncate(2) (the gofer's seccomp filter allows both; no path is
// opened) every statsEvery while they change, and a last time, Final, at
// the release. A reader that catches one half written retries.
type statsWriter struct {
	mu     sync.Mutex
	f      *os.File
	target string
	last   uint64 // Total+SyncsClean at the last write
	wrote  bool
	stop   chan struct{}
	done   chan struct{}
}

// statsEvery is how often a changing volume's stats file is rewritten:
// what a bench reading it between phases waits for.
const statsEvery = 250 * time.Millisecond

func startStats(v *Volume, f *os.File, target string) *statsWriter {
	w := &statsWriter{f: f, target: target, stop: make(chan struct{}), done: make(chan struct{})}
	w.write(v, false)
	go func() {
		defer close(w.done)
		t := time.NewTicker(statsEvery)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
				w.write(v, false)
			}
		}
	}()
	return w
}

func (w *statsWriter) write(v *Volume, final bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return
	}
	s := v.Stats()
	s.Target, s.Final = w.target, final
	key := s.Total + s.SyncsClean
	if key == w.last && w.wrote && !final {
		return
	}
	w.last, w.wrote = key, true
	js, err := json.Marshal(s)
	if err != nil {
		return
	}
	js = append(js, '\n')
	if _, err := w.f.WriteAt(js, 0); err == nil {
		_ = w.f.Truncate(int64(len(js)))
	}
}

// finish writes the final counters and closes the file.
func (w *statsWriter) finish(v *Volume) {
	close(w.stop)
	<-w.done
	w.write(v, true)
	w.mu.Lock()
	_ = w.f.Close()
	w.f = nil
	w.mu.Unlock()
}
