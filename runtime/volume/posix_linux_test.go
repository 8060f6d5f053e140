package volume

import (
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/abi/linux"
	"gvisor.dev/gvisor/pkg/context"
	"gvisor.dev/gvisor/pkg/lisafs"
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

// TestSetgidDirectoryInherits: in a setgid directory every new entry
// takes the directory's group and a new directory the setgid bit, as
// ext4's inode_init_owner does. The Sentry's gofer client applies the rule
// itself only to files and directories it creates with open and mkdir; a
// fifo, device or symlink made in a setgid directory on a volume got the
// creator's group.
func TestSetgidDirectoryInherits(t *testing.T) {
	s := serve(t, 64<<20)
	ctx := context.Background()
	d, err := s.root.MkdirAt(ctx, "shared", 0o2775, 0, 1234)
	if err != nil {
		t.Fatal(err)
	}
	dir := s.client.NewFD(d.ControlFD)
	const uid, gid = 1000, 1000 // the creator's, as the Sentry sends them
	type made struct {
		name string
		gid  uint32
		mode uint32
	}
	var got []made
	if in, err := dir.MknodAt(ctx, "fifo", linux.ModeNamedPipe|0o644, uid, gid, 0, 0); err != nil {
		t.Fatal(err)
	} else {
		got = append(got, made{"fifo", in.Stat.GID, uint32(in.Stat.Mode)})
	}
	if in, err := dir.SymlinkAt(ctx, "link", "fifo", uid, gid); err != nil {
		t.Fatal(err)
	} else {
		got = append(got, made{"link", in.Stat.GID, uint32(in.Stat.Mode)})
	}
	if in, err := dir.MkdirAt(ctx, "sub", 0o755, uid, gid); err != nil {
		t.Fatal(err)
	} else {
		got = append(got, made{"sub", in.Stat.GID, uint32(in.Stat.Mode)})
	}
	if in, _, _, err := dir.OpenCreateAt(ctx, "file", unix.O_RDWR, 0o644, uid, gid); err != nil {
		t.Fatal(err)
	} else {
		got = append(got, made{"file", in.Stat.GID, uint32(in.Stat.Mode)})
	}
	for _, m := range got {
		h, err := s.conn.vol.fs.Lstat("shared/" + m.name)
		if err != nil {
			t.Fatal(err)
		}
		if m.gid != 1234 || h.GID != 1234 {
			t.Errorf("%s in a setgid directory of group 1234: group %d (answered %d), want 1234", m.name, h.GID, m.gid)
		}
		wantSgid := m.name == "sub"
		if (h.Mode&unix.S_ISGID != 0) != wantSgid || (m.mode&unix.S_ISGID != 0) != wantSgid {
			t.Errorf("%s: mode %#o (answered %#o); setgid should be set only on the new directory", m.name, h.Mode, m.mode)
		}
	}
	// Outside a setgid directory the creator's group stands.
	in, err := s.root.MknodAt(ctx, "plain", linux.ModeNamedPipe|0o644, uid, gid, 0, 0)
	if err != nil || in.Stat.GID != gid {
		t.Errorf("fifo outside: group %d, %v; want %d", in.Stat.GID, err, gid)
	}
}

// TestWalkNameTooLong: a lookup of a name longer than 255 bytes is
// ENAMETOOLONG, as ext4_lookup answers; the volume said ENOENT, which the
// Sentry cached as a negative entry and stat(2) of the name reported.
func TestWalkNameTooLong(t *testing.T) {
	s := serve(t, 64<<20)
	ctx := context.Background()
	long := strings.Repeat("n", 256)
	if _, err := s.root.Walk(ctx, long); err != unix.ENAMETOOLONG {
		t.Errorf("walk of a 256-byte name: %v, want ENAMETOOLONG", err)
	}
	if _, err := s.root.WalkStat(ctx, []string{"", long}); err != unix.ENAMETOOLONG {
		t.Errorf("walkstat of a 256-byte name: %v, want ENAMETOOLONG", err)
	}
	if _, err := s.root.Walk(ctx, strings.Repeat("n", 255)); err != unix.ENOENT {
		t.Errorf("walk of a missing 255-byte name: %v, want ENOENT", err)
	}
}

// TestRenameOverOtherLinkOfSameInode: rename(b, c) where b and c are two
// links of one file removes b, as the Sentry's gofer client has it (it
// moves b's dentry over c's: the guest sees b gone). The volume kept b (as
// POSIX's rename does, doing nothing), so b came back in the next episode:
// the volume held other than what the guest saw.
func TestRenameOverOtherLinkOfSameInode(t *testing.T) {
	s := serve(t, 64<<20)
	ctx := context.Background()
	cfd, _ := s.create(t, "b", []byte("data"))
	d, err := s.root.MkdirAt(ctx, "dir", 0o755, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	dir := s.client.NewFD(d.ControlFD)
	if _, err := s.root.LinkAt(ctx, cfd.ID(), "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := dir.LinkAt(ctx, cfd.ID(), "e"); err != nil {
		t.Fatal(err)
	}
	if err := s.root.RenameAt(ctx, "b", s.root.ID(), "c", 0); err != nil {
		t.Fatalf("rename b c: %v", err)
	}
	if err := dir.RenameAt(ctx, "e", s.root.ID(), "c", 0); err != nil {
		t.Fatalf("rename dir/e c: %v", err)
	}
	for _, p := range []string{"b", "dir/e"} {
		if _, err := s.conn.vol.fs.Lstat(p); err == nil {
			t.Errorf("%s is still on the volume after its rename over another link of its inode", p)
		}
	}
	h, err := s.conn.vol.fs.Lstat("c")
	if err != nil || h.Nlink != 1 {
		t.Errorf("c: nlink %v, %v; want 1", h, err)
	}
	// A rename of a name onto itself changes nothing.
	if err := s.root.RenameAt(ctx, "c", s.root.ID(), "c", 0); err != nil {
		t.Fatalf("rename c c: %v", err)
	}
	if _, err := s.conn.vol.fs.Lstat("c"); err != nil {
		t.Errorf("c after rename c c: %v", err)
	}
	s.close()
	e2fsckClean(t, s.path)
}

// TestDirectorySize: a directory's st_size is its size on the volume (a
// multiple of the block size that grows with its entries), as the kernel's
// ext4 reports it, once the volume has synced (ext4lite lays a changed
// directory out then; until then the last sync's size, at least a block).
// The server said 4096 for every directory, so a new episode saw a
// 31-block directory as one block where the kernel's mount said 126976.
func TestDirectorySize(t *testing.T) {
	s := serve(t, 64<<20)
	ctx := context.Background()
	d, err := s.root.MkdirAt(ctx, "big", 0o755, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d.Stat.Size != 4096 {
		t.Errorf("a new directory: st_size %d, want 4096", d.Stat.Size)
	}
	dir := s.client.NewFD(d.ControlFD)
	for i := 0; i < 1000; i++ {
		if _, err := dir.MknodAt(ctx, fmt.Sprintf("entry-%04d-with-a-longer-name", i), linux.ModeRegular|0o644, 0, 0, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.conn.vol.Sync(); err != nil {
		t.Fatal(err)
	}
	var st lisafs.Statx
	if err := dir.StatTo(ctx, &st); err != nil {
		t.Fatal(err)
	}
	h, err := s.conn.vol.fs.Lstat("big")
	if err != nil {
		t.Fatal(err)
	}
	if h.Size <= 4096 || st.Size != uint64(h.Size) {
		t.Errorf("a directory of 1,000 entries after a sync: st_size %d, the volume's %d; want the volume's (more than a block)", st.Size, h.Size)
	}
}

// TestSetgidDirectoryNoForeignSetgid: a user other than root who makes a
// group-executable setgid file in a setgid directory does not get a file
// that runs with the directory's group (a group it may not be in): the
// setgid bit is stripped, as Linux strips it for a non-member
// (mode_strip_sgid). Root keeps it, and so does a file without group-exec.
func TestSetgidDirectoryNoForeignSetgid(t *testing.T) {
	s := serve(t, 64<<20)
	ctx := context.Background()
	d, err := s.root.MkdirAt(ctx, "shared", 0o2777, 0, 1234)
	if err != nil {
		t.Fatal(err)
	}
	dir := s.client.NewFD(d.ControlFD)
	for _, tc := range []struct {
		name       string
		uid        lisafs.UID
		mode, want uint32
	}{
		{"nobody-exec", 65534, 0o2755, 0o755},
		{"nobody-noexec", 65534, 0o2745, 0o2745},
		{"root-exec", 0, 0o2755, 0o2755},
	} {
		in, _, _, err := dir.OpenCreateAt(ctx, tc.name, unix.O_RDWR, linux.FileMode(tc.mode), tc.uid, 1234)
		if err != nil {
			t.Fatal(err)
		}
		h, err := s.conn.vol.fs.Lstat("shared/" + tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if in.Stat.Mode&0o7777 != uint16(tc.want) || h.Mode&0o7777 != tc.want || h.GID != 1234 {
			t.Errorf("%s: mode %#o (answered %#o) group %d; want %#o, group 1234", tc.name, h.Mode&0o7777, in.Stat.Mode&0o7777, h.GID, tc.want)
		}
	}
	n, err := dir.MknodAt(ctx, "fifo", linux.ModeNamedPipe|0o2775, 65534, 1234, 0, 0)
	if err != nil || n.Stat.Mode&0o7777 != 0o775 {
		t.Errorf("nobody's fifo 02775: mode %#o, %v; want 0775", n.Stat.Mode&0o7777, err)
	}
}
