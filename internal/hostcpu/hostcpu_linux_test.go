package hostcpu

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
)

// TestPin: every thread of the process, including those other goroutines
// keep making while Pin runs and those made after it, is confined to the
// CPU asked for; a CPU the process may not use is refused.
func TestPin(t *testing.T) {
	have, err := Allowed()
	if err != nil {
		t.Fatal(err)
	}
	if len(have) < 2 {
		t.Skipf("needs 2 CPUs; this process may use %d", len(have))
	}
	// Pin changes this whole test binary: run it in a child of its own.
	if os.Getenv("HOSTCPU_PIN_CHILD") == "" {
		exe, _ := os.Executable()
		cmd := exec.Command(exe, "-test.run=^TestPin$", "-test.v")
		cmd.Env = append(os.Environ(), "HOSTCPU_PIN_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	last := have[len(have)-1]
	if err := Pin([]int{1 << 20}); err == nil {
		t.Error("Pin of CPU 1048576 succeeded")
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 { // goroutines that keep new threads coming
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				var inner sync.WaitGroup
				inner.Add(1)
				go func() { runtime.LockOSThread(); inner.Done() }() // its thread dies with it
				inner.Wait()
			}
		}()
	}
	if err := Pin([]int{last}); err != nil {
		t.Fatal(err)
	}
	for range 20 { // threads made after Pin
		done := make(chan struct{})
		go func() { runtime.LockOSThread(); close(done) }()
		<-done
	}
	close(stop)
	wg.Wait()
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		got, err := StatusList(filepath.Join("/proc/self/task", task.Name(), "status"))
		if err != nil {
			continue // ended meanwhile
		}
		if got != strconv.Itoa(last) {
			t.Errorf("thread %s may run on CPUs %s, want %d only", task.Name(), got, last)
		}
	}
}
