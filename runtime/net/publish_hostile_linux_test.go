package episodenet

import (
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/spec"
)

// TestPublishHostileGuest: the guest holds the other end of each
// published port's pair, so it may take no connection at all while
// clients keep coming (a relay that stopped reading, or one the guest
// killed), or take every one and never read it. The host side's cost
// stays bounded either way: TCP clients beyond publishMaxConns wait in
// the listener's backlog instead of costing goroutines and descriptors,
// what clients send waits in socket buffers rather than in 1 MiB pipes,
// and Close returns at once, with the queue full, never hanging the
// episode's end.
func TestPublishHostileGuest(t *testing.T) {
	t.Run("takes-nothing", func(t *testing.T) { testPublishHostileGuest(t, false) })
	t.Run("never-reads", func(t *testing.T) { testPublishHostileGuest(t, true) })
}

func testPublishHostileGuest(t *testing.T, takes bool) {
	dir := t.TempDir()
	p, err := Publish([]spec.Port{{HostSocket: filepath.Join(dir, "s.sock"), GuestPort: 80}, {HostAddr: "127.0.0.1:0", GuestPort: 81}})
	if err != nil {
		t.Fatal(err)
	}
	guest := p.GuestFiles()                       // the hostile relay's ends
	p.ports[0].guest, p.ports[1].guest = nil, nil // the test owns them now
	var taken []int                               // the connections it took, never read
	var took sync.WaitGroup
	closeGuest := func() { // a shutdown wakes the reader's recvmsg, a close would not
		for _, f := range guest {
			unix.Shutdown(int(f.Fd()), unix.SHUT_RDWR)
			f.Close()
		}
		guest = nil
	}
	defer func() {
		closeGuest()
		took.Wait()
		for _, fd := range taken {
			unix.Close(fd)
		}
	}()
	fds0, g0 := openFDs(t), runtime.NumGoroutine()
	var mu sync.Mutex
	if takes {
		for _, f := range guest {
			fd := int(f.Fd())
			took.Go(func() {
				b, oob := make([]byte, 8), make([]byte, unix.CmsgSpace(4*8))
				for {
					_, oobn, _, _, err := unix.Recvmsg(fd, b, oob, 0)
					if err != nil || oobn == 0 {
						return
					}
					msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
					for _, m := range msgs {
						fds, _ := unix.ParseUnixRights(&m)
						mu.Lock()
						taken = append(taken, fds...)
						mu.Unlock()
					}
				}
			})
		}
	}
	p.Serve()

	const clients = 3 * publishMaxConns
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	tcp := p.ports[1].ln.Addr().String()
	for i := range clients {
		network, addr := "tcp", tcp
		if i%4 == 0 {
			network, addr = "unix", p.ports[0].port.HostSocket
		}
		c, err := net.DialTimeout(network, addr, 2*time.Second)
		if err != nil {
			break // the backlog is full: fine, the host side is not hurt
		}
		conns = append(conns, c)
	}
	// Every TCP client sends 1 MiB the guest never takes.
	var wg sync.WaitGroup
	for _, c := range conns {
		if _, ok := c.(*net.TCPConn); ok {
			wg.Go(func() {
				c.SetWriteDeadline(time.Now().Add(3 * time.Second))
				c.Write(make([]byte, 1<<20))
			})
		}
	}
	wg.Wait()
	mu.Lock()
	fds, gs := openFDs(t)-fds0-len(conns)-len(taken), runtime.NumGoroutine()-g0 // less the test's own ends
	mu.Unlock()
	pipes, held := pipeBytes(t)
	t.Logf("%d clients connected: the host side holds %d more descriptors (%d pipes holding %d MiB), %d more goroutines (publishMaxConns %d)", len(conns), fds, pipes, held>>20, gs, publishMaxConns)
	// Each spliced TCP client: its connection and the pair's two ends,
	// and two goroutines once the guest has its end; the unix port's loop
	// holds one client.
	if max := 3*publishMaxConns + 16; fds > max {
		t.Errorf("the host side holds %d more descriptors with a guest that reads nothing, want at most %d", fds, max)
	}
	if max := 2*publishMaxConns + 16; gs > max {
		t.Errorf("the host side runs %d more goroutines with a guest that reads nothing, want at most %d", gs, max)
	}
	// What clients send and the guest does not take waits in socket
	// buffers, not in pipes the host side sized to 1 MiB each.
	if held > 16<<20 {
		t.Errorf("the host side's pipes hold %d MiB of what clients sent a guest that reads nothing", held>>20)
	}

	// The episode ends: the sandbox's ends go first, then Close.
	closeGuest()
	took.Wait()
	for _, fd := range taken {
		unix.Close(fd)
	}
	taken = nil
	done := make(chan struct{})
	t0 := time.Now()
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
		t.Logf("Close in %v", time.Since(t0))
	case <-time.After(10 * time.Second):
		t.Fatal("Close hung on a guest that takes nothing")
	}
	if _, err := os.Lstat(p.ports[0].port.HostSocket); !os.IsNotExist(err) {
		t.Errorf("the unix socket outlived Close: %v", err)
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine()-g0 > 4 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if gs := runtime.NumGoroutine() - g0; gs > 4 {
		t.Errorf("%d goroutines of the host side outlived Close and the clients", gs)
	}
}

// pipeBytes counts this process's pipes and the bytes queued in them.
func pipeBytes(t *testing.T) (pipes, held int) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		l, _ := os.Readlink("/proc/self/fd/" + e.Name())
		if !strings.HasPrefix(l, "pipe:") {
			continue
		}
		fd, _ := strconv.Atoi(e.Name())
		if n, err := unix.IoctlGetInt(fd, unix.TIOCINQ); err == nil { // FIONREAD
			pipes++
			held += n
		}
	}
	return pipes / 2, held / 2 // each pipe is open at both ends
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
