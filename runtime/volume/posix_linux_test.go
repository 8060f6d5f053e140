package volume

import (
	"testing"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/abi/linux"
	"gvisor.dev/gvisor/pkg/context"
)

// The volume server's part of what internal/posixcheck found different
// from the kernel's ext4 (pkg/gvx's TestPOSIXConformance runs the whole
// suite in an episode); each test here sends what the Sentry sends.

// TestCreateKeepsSpecialBits: a file, directory or device the guest
// creates with setuid, setgid or sticky in its mode keeps them, as on the
// kernel's ext4 (open(O_CREAT, 04755) is 04755 there; a volume made it
// 0755, and a directory made 01777 lost its sticky bit).
func TestCreateKeepsSpecialBits(t *testing.T) {
	s := serve(t, 64<<20)
	ctx := context.Background()
	in, _, _, err := s.root.OpenCreateAt(ctx, "suid", unix.O_RDWR, 0o4755, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if in.Stat.Mode&0o7777 != 0o4755 {
		t.Errorf("open(O_CREAT, 04755): mode %#o, want 04755", in.Stat.Mode&0o7777)
	}
	d, err := s.root.MkdirAt(ctx, "sticky", 0o1777, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d.Stat.Mode&0o7777 != 0o1777 {
		t.Errorf("mkdir 01777: mode %#o, want 01777", d.Stat.Mode&0o7777)
	}
	n, err := s.root.MknodAt(ctx, "fifo", linux.ModeNamedPipe|0o6644, 0, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n.Stat.Mode&0o7777 != 0o6644 {
		t.Errorf("mknod fifo 06644: mode %#o, want 06644", n.Stat.Mode&0o7777)
	}
	// What the volume holds, not only what the server answered.
	for name, want := range map[string]uint32{"suid": 0o4755, "sticky": 0o1777, "fifo": 0o6644} {
		h, err := s.conn.vol.fs.Lstat(name)
		if err != nil || h.Mode&0o7777 != want {
			t.Errorf("%s on the volume: mode %#o, %v; want %#o", name, h.Mode&0o7777, err, want)
		}
	}
}
