package episodenet

import (
	"bytes"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// relayPair is a Publisher with one port whose pair's guest end the test
// holds: the test plays a hostile guest's relay.
func relayPair(t *testing.T) (*Publisher, *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "pair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c.(*net.UnixConn)
	}
	return &Publisher{ports: []*publishedPort{{ctl: conn(fds[0])}}}, conn(fds[1])
}

// relayWordWithin runs RelayWord and fails the test if it takes longer
// than limit (a hang is what the hostile guest is after).
func relayWordWithin(t *testing.T, p *Publisher, word string, wait, limit time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	t0 := time.Now()
	go func() { done <- p.RelayWord(word, wait) }()
	select {
	case err := <-done:
		t.Logf("%s (wait %v): %v in %v", word, wait, err, time.Since(t0).Round(time.Millisecond))
		return err
	case <-time.After(limit):
		t.Fatalf("RelayWord(%s, %v) still blocked after %v", word, wait, limit)
		return nil
	}
}

// TestRelayWordHostileGuest: the guest owns the relay's end of the pair,
// so before a save the host may meet a relay that never answers, answers
// junk or a message far over the answer's 64 bytes, answered ahead of the
// question, or stopped reading until its queue is full. Each costs the
// checkpoint at most relayWordSend plus relayLinksWait and an error the
// caller ignores; none blocks it, panics, or makes it read past 64 bytes.
// An honest relay's answer is taken.
func TestRelayWordHostileGuest(t *testing.T) {
	const wait = 200 * time.Millisecond
	limit := relayWordSend + wait + 2*time.Second

	t.Run("honest", func(t *testing.T) {
		p, g := relayPair(t)
		go func() {
			b := make([]byte, 64)
			if n, err := g.Read(b); err == nil && string(b[:n]) == LinksSave {
				g.Write([]byte(linksOK))
			}
		}()
		if err := relayWordWithin(t, p, LinksSave, time.Second, limit); err != nil {
			t.Errorf("honest relay: %v", err)
		}
	})
	t.Run("silent", func(t *testing.T) {
		p, _ := relayPair(t)
		if err := relayWordWithin(t, p, LinksSave, wait, limit); err == nil {
			t.Error("a relay that never answered was taken as having answered")
		}
	})
	t.Run("junk", func(t *testing.T) {
		p, g := relayPair(t)
		g.Write(bytes.Repeat([]byte{0xff}, 1<<16)) // ahead of the question, and huge
		err := relayWordWithin(t, p, LinksSave, wait, limit)
		if err == nil || !strings.Contains(err.Error(), "relay answered") || len(err.Error()) > 400 {
			t.Errorf("junk answer: %v", err)
		}
	})
	t.Run("queue full", func(t *testing.T) {
		p, _ := relayPair(t)
		// The guest takes nothing: fill its queue as connections handed
		// over and never accepted would.
		c := p.ports[0].ctl
		c.SetWriteDeadline(time.Now().Add(2 * time.Second))
		n := 0
		for ; n < 1<<20; n++ {
			if _, err := c.Write([]byte{1}); err != nil {
				break
			}
		}
		c.SetWriteDeadline(time.Time{})
		t.Logf("queue full after %d messages", n)
		if err := relayWordWithin(t, p, LinksSave, wait, limit); err == nil {
			t.Error("a word sent into a full queue reported success")
		}
		// The restore's word, which waits for no answer, must not hang either.
		if err := relayWordWithin(t, p, LinksRestore, 0, limit); err == nil {
			t.Error("a restore word into a full queue reported success")
		}
	})
}
