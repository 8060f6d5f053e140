package volume

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/context"

	"z.gfire.dev/gvx/ext4lite"
)

// TestStatsCountsRequests: the stats file holds, at the release, what the
// Sentry asked: requests by type, bytes, syncs (a sync of a clean volume
// apart).
func TestStatsCountsRequests(t *testing.T) {
	dir := t.TempDir()
	sp := filepath.Join(dir, "ep.volume-0.json")
	sf, err := os.OpenFile(sp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	vp := filepath.Join(dir, "vol.ext4")
	fsys, err := ext4lite.Create(vp, 64<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	fsys.Close()
	s := serveFileStats(t, vp, Mount{Target: "/vol"}, sf)
	ctx := context.Background()
	data := bytes.Repeat([]byte("x"), 10000)
	_, fd := s.create(t, "a", data)
	for i := 0; i < 2; i++ {
		if err := fd.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, len(data))
	if n, err := fd.Read(ctx, buf, 0); err != nil || n != uint64(len(data)) {
		t.Fatalf("read: %d %v", n, err)
	}
	s.dir(t, "d")
	if err := s.root.UnlinkAt(ctx, "nope", 0); err != unix.ENOENT {
		t.Fatalf("unlink of a missing name: %v", err)
	}
	s.close()
	b, err := os.ReadFile(sp)
	if err != nil {
		t.Fatal(err)
	}
	var st Stats
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("stats file %q: %v", b, err)
	}
	want := map[string]uint64{"Mount": 1, "OpenCreateAt": 1, "PWrite": 1, "FSync": 2, "PRead": 1, "MkdirAt": 1, "UnlinkAt": 1}
	for k, n := range want {
		if st.Requests[k] != n {
			t.Errorf("requests[%s] = %d, want %d (all: %v)", k, st.Requests[k], n, st.Requests)
		}
	}
	var total uint64
	for _, n := range st.Requests {
		total += n
	}
	if !st.Final || st.Target != "/vol" || st.Total != total || st.BytesWritten != 10000 || st.BytesRead != 10000 ||
		st.Syncs != 1 || st.SyncsClean != 1 || st.SyncNanos == 0 || !st.HostSync {
		t.Errorf("stats %+v", st)
	}
}

// TestNoHostSyncKilledGofer: with NoHostSync (durability=episode) a guest
// fsync still commits the journal into the volume file, so a gofer killed
// right after it (the file's bytes as the host's page cache holds them,
// no Close) leaves a volume that replays to everything fsynced and that
// ext4lite's Check and e2fsck -fn pass.
func TestNoHostSyncKilledGofer(t *testing.T) {
	s := serveMount(t, 64<<20, Mount{Target: "/vol", NoHostSync: true})
	ctx := context.Background()
	data := bytes.Repeat([]byte("fsynced;"), 512)
	d := s.dir(t, "sub")
	for _, name := range []string{"a", "b", "c"} {
		in, ofd, _, err := d.OpenCreateAt(ctx, name, unix.O_RDWR, 0o644, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		fd := s.client.NewFD(ofd)
		_ = s.client.NewFD(in.ControlFD)
		if _, err := fd.Write(ctx, data, 0); err != nil {
			t.Fatal(err)
		}
		if err := fd.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if s.conn.vol.Stats().HostSync {
		t.Fatal("Stats.HostSync is true on a NoHostSync mount")
	}
	// The kill: copy the file as it is now, the server still running.
	killed := filepath.Join(t.TempDir(), "killed.ext4")
	src, err := os.ReadFile(s.path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(killed, src, 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := ext4lite.Open(killed, nil) // replays the journal
	if err != nil {
		t.Fatalf("open after the kill: %v", err)
	}
	for _, name := range []string{"a", "b", "c"} {
		f, err := v.Open("sub/" + name)
		if err != nil {
			t.Fatalf("sub/%s, fsynced before the kill: %v", name, err)
		}
		got, _ := io.ReadAll(f)
		f.Close()
		if !bytes.Equal(got, data) {
			t.Fatalf("sub/%s: %d bytes, not what was fsynced", name, len(got))
		}
	}
	if r, err := v.Check(nil); err != nil || !r.Clean() {
		t.Fatalf("Check after the kill: %v %v", r, err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	e2fsckClean(t, killed)
}
