package runtime

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	episodenet "z.gfire.dev/gvx/runtime/net"
	"z.gfire.dev/gvx/spec"
)

// TestErrorsNameSpecFields: a refused mount or port names the spec's field
// ("mounts[1].source", "ports[0].host_addr"), which the SDK, --spec files
// and rungv run's flags all map back to, rather than one front's flag.
func TestErrorsNameSpecFields(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "v.ext4")
	if err := os.WriteFile(real, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.ext4")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	_, err := openVolumes([]Mount{{Type: MountTmpfs, Target: "/t"}, {Type: MountVolume, Source: link, Target: "/d"}})
	if err == nil || !strings.HasPrefix(err.Error(), "mounts[1].source: ") || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("a volume behind a symlink: %v; want it named mounts[1].source", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = episodenet.Publish([]spec.Port{{HostAddr: ln.Addr().String(), GuestPort: 80}})
	if err == nil || !strings.HasPrefix(err.Error(), "ports[0].host_addr ") {
		t.Errorf("a host address in use: %v; want it named ports[0].host_addr", err)
	}
	sock := filepath.Join(dir, "x.sock")
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = episodenet.Publish([]spec.Port{{HostAddr: "127.0.0.1:0", GuestPort: 81}, {HostSocket: sock, GuestPort: 80}})
	if err == nil || !strings.HasPrefix(err.Error(), "ports[1].host_socket "+sock+": ") {
		t.Errorf("a host socket path that is a file: %v; want it named ports[1].host_socket", err)
	}
}
