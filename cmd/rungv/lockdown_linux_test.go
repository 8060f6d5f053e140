package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLockdown checks, while a guest runs, that each of rungv's host
// processes (the host side, the supervisor, the episode's init) runs with
// no_new_privs, a seccomp filter and no capability, and is not dumpable:
// a process of the same uid and user namespace without capabilities (for
// the supervisor and init, what the gofer is; for the host side, any of
// the caller's) cannot open its memory for writing. Having no capability
// themselves, they would be open to exactly that process otherwise.
func TestLockdown(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		needNamespaces(t, u)
		tmp := privateTmp(t, u)
		c := command(t, u, tmp, "run", imageRef, "sh", "-c", "echo started; read x")
		pr, pw, _ := os.Pipe()
		in, inw, _ := os.Pipe()
		c.Stdout, c.Stdin = pw, in
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		pw.Close()
		in.Close()
		defer func() {
			inw.Write([]byte("done\n"))
			inw.Close()
			if err := c.Wait(); err != nil {
				t.Errorf("rungv: %v", err)
			}
			checkClean(t, tmp)
		}()
		if s, _ := bufio.NewReader(pr).ReadString('\n'); s != "started\n" {
			c.Process.Kill()
			t.Fatalf("guest did not start: %q", s)
		}
		host := c.Process.Pid // as nobody: setpriv exec'd rungv, same pid
		sup := childRunning(t, host, "_gvx-supervise")
		init := childRunning(t, sup, "_gvx-init")
		uid := 0 // the probe's uid in the host's user namespace
		if u.name == "nobody" {
			uid = 65534
		}
		for _, p := range []struct {
			name string
			pid  int
		}{{"host side", host}, {"supervisor", sup}, {"init", init}} {
			// init locks down once runsc run --detach is back, which may
			// be just after the guest's first output.
			var st []byte
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				var err error
				if st, err = os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid)); err != nil {
					t.Fatal(err)
				}
				if bytes.Contains(st, []byte("Seccomp:\t2\n")) || time.Now().After(deadline) {
					break
				}
			}
			caps := "0000000000000000"
			if p.name == "supervisor" && uid == 0 {
				// As root every episode has a host cgroup (the pids limit),
				// and a v1 hierarchy's root is 0555: the supervisor keeps
				// CAP_DAC_OVERRIDE alone, held by Landlock to the cgroups'
				// parents (docs/runtime.md, Self-lockdown).
				caps = "0000000000000002"
			}
			for _, want := range []string{"NoNewPrivs:\t1\n", "Seccomp:\t2\n", "CapEff:\t" + caps + "\n", "CapPrm:\t" + caps + "\n"} {
				if !bytes.Contains(st, []byte(want)) {
					t.Errorf("%s: /proc/%d/status lacks %q:\n%s", p.name, p.pid, want, st)
				}
			}
			if p.name == "host side" {
				if got := openMem(t, p.pid, uid, false); got != "refused" {
					t.Errorf("%s: a process of uid %d without capabilities: /proc/%d/mem %s", p.name, uid, p.pid, got)
				}
				continue
			}
			// The gofer runs there: uid 0 of the episode's user
			// namespace, with no CAP_SYS_PTRACE.
			if got := openMem(t, p.pid, uid, true); got != "refused" {
				t.Errorf("%s: a process of its uid and user namespace without capabilities: /proc/%d/mem %s", p.name, p.pid, got)
			}
			// The caller's uid owns the episode's user namespace, so it
			// has every capability over the supervisor and init
			// (docs/runtime.md, residual risks).
			t.Logf("%s: a process of uid %d in the host's user namespace: /proc/%d/mem %s", p.name, uid, p.pid, openMem(t, p.pid, uid, false))
		}
	})
}

// childRunning returns the PID of pid's child whose command line has arg.
func childRunning(t *testing.T, pid int, arg string) int {
	t.Helper()
	for _, k := range children(pid) {
		cl, _ := os.ReadFile("/proc/" + k + "/cmdline")
		if bytes.Contains(cl, []byte("\x00"+arg+"\x00")) {
			n, _ := strconv.Atoi(k)
			return n
		}
	}
	t.Fatalf("no child of %d runs %s", pid, arg)
	return 0
}

// memProbeEnv makes the test binary memProbe.
const memProbeEnv = "GVX_TEST_MEM_PROBE"

var (
	probeOnce sync.Once
	probeBin  string
	probeErr  error
)

// openMem runs memProbe on pid as uid with no capabilities: in pid's user
// namespace (as uid 0 there) when inNS, else in the host's. It returns
// "refused" or what happened instead.
func openMem(t *testing.T, pid, uid int, inNS bool) string {
	t.Helper()
	// The test binary, where every uid may run it.
	probeOnce.Do(func() {
		probeBin = filepath.Join(shared, "memprobe")
		var src, dst *os.File
		if src, probeErr = os.Open(os.Args[0]); probeErr != nil {
			return
		}
		defer src.Close()
		if dst, probeErr = os.OpenFile(probeBin, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755); probeErr != nil {
			return
		}
		if _, probeErr = io.Copy(dst, src); probeErr == nil {
			probeErr = dst.Close()
		}
	})
	if probeErr != nil {
		t.Fatal(probeErr)
	}
	drop := []string{"setpriv", "--inh-caps=-all", "--bounding-set=-all", probeBin}
	var argv []string
	if inNS {
		if _, err := exec.LookPath("nsenter"); err != nil {
			t.Skip("nsenter (util-linux) is missing")
		}
		argv = append([]string{"nsenter", fmt.Sprintf("--user=/proc/%d/ns/user", pid), "--setuid=0", "--setgid=0"}, drop...)
	} else {
		id := strconv.Itoa(uid)
		argv = append([]string{"setpriv", "--reuid=" + id, "--regid=" + id, "--clear-groups"}, drop[1:]...)
	}
	cmd := boundedCommand(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), memProbeEnv+"="+strconv.Itoa(pid))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("memory probe: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// memProbe opens /proc/PID/mem for writing and, if that works, writes one
// byte of a writable mapping back as it was: it prints "refused" or what
// it could do.
func memProbe(pid string) {
	f, err := os.OpenFile("/proc/"+pid+"/mem", os.O_RDWR, 0)
	if err != nil {
		fmt.Println("refused")
		os.Exit(0)
	}
	msg := "opened for writing"
	if maps, err := os.ReadFile("/proc/" + pid + "/maps"); err == nil {
		for _, l := range strings.Split(string(maps), "\n") {
			var lo, hi uint64
			var perm string
			if n, _ := fmt.Sscanf(l, "%x-%x %s", &lo, &hi, &perm); n == 3 && strings.HasPrefix(perm, "rw") {
				b := make([]byte, 1)
				if _, err := f.ReadAt(b, int64(lo)); err == nil {
					if _, err := f.WriteAt(b, int64(lo)); err == nil {
						msg = fmt.Sprintf("written (at %#x)", lo)
					}
				}
				break
			}
		}
	}
	fmt.Println(msg)
	os.Exit(0)
}
