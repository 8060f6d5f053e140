package runtime

import (
	"math"
	"os"
	"runtime/metrics"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// gcSettings are this process's GOGC and Go memory limit now.
func gcSettings() (percent, limit uint64) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// TestHoldBootGC: a sandbox process given bootGCEnv runs without Go's
// collector (up to bootGCLimit) while the pipe is open, and with the
// settings it had once the other end is closed; the descriptor is closed
// then. Without the variable, or outside boot, nothing changes.
func TestHoldBootGC(t *testing.T) {
	const off = ^uint64(0) // GOGC=off (-1) as the metric reads it
	percent0, limit0 := gcSettings()
	if percent0 == off {
		t.Skip("GOGC=off in this test's environment")
	}
	holdBootGC([]string{"--root=/x", "boot"}) // no variable: nothing to do
	if p, l := gcSettings(); p != percent0 || l != limit0 {
		t.Fatalf("without %s: GOGC %d, limit %d; want %d, %d", bootGCEnv, p, l, percent0, limit0)
	}

	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	fd := p[0] // holdBootGC owns it from here (it closes it)
	w := os.NewFile(uintptr(p[1]), "gc hold")
	defer w.Close()
	t.Setenv(bootGCEnv, strconv.Itoa(fd))
	holdBootGC([]string{"--root=/x", "gofer"})
	if p, _ := gcSettings(); p != percent0 || os.Getenv(bootGCEnv) == "" {
		t.Fatalf("not boot: GOGC %d (want %d), %s consumed", p, percent0, bootGCEnv)
	}
	holdBootGC([]string{"--root=/x", "boot", "--bundle=/b"})
	if os.Getenv(bootGCEnv) != "" {
		t.Errorf("%s still set: runsc's code would see it", bootGCEnv)
	}
	if p, l := gcSettings(); p != off || l != bootGCLimit {
		t.Fatalf("held: GOGC %d, limit %d; want off, %d", p, l, bootGCLimit)
	}
	time.Sleep(20 * time.Millisecond)
	if p, _ := gcSettings(); p != off {
		t.Fatalf("released with the pipe still open: GOGC %d", p)
	}
	w.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p, l := gcSettings()
		if p == percent0 && l == limit0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the pipe closed: GOGC %d, limit %d; want %d, %d", p, l, percent0, limit0)
		}
		time.Sleep(time.Millisecond)
	}
	if limit0 != math.MaxInt64 {
		t.Logf("this test's memory limit was %d", limit0)
	}
	// The read end is closed.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
		t.Errorf("descriptor %d after the release: %v, want EBADF (closed)", fd, err)
	}
}
