package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"z.gfire.dev/gvx/image/dindtest"
)

// sealexeBin builds testdata/sealexe (static) into the shared directory's
// bin/, which guests see through a read-only bind mount.
func sealexeBin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(shared, "bin")
	if _, err := os.Stat(filepath.Join(bin, "sealexe")); err != nil {
		build := exec.Command("go", "build", "-o", filepath.Join(bin, "sealexe"), "./testdata/sealexe")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		_ = os.Chmod(bin, 0o755)
	}
	return bin
}

// TestRuncSealedExe is issue 25's first check: a guest program does, in a
// privileged episode, runc's own sequence for a zero-copy sealed
// /proc/self/exe (fsopen("overlay"), lowerdir=<its directory>:<a dummy
// directory>, xino=off, FSCONFIG_CMD_CREATE, fsmount read-only, openat
// O_PATH, fstatfs, exec of /proc/self/fd/N) and then, as a container's
// process would (CVE-2019-5736), tries to write the binary through the
// O_PATH fd's /proc link, through the mount, by creating or renaming in
// it, and through the re-executed child's /proc/self/exe (which names
// the file inside the detached mount, /sealexe, as on Linux): every write
// must be refused. An overlay asked for xino=on is still refused
// (EINVAL): the patch accepts only off and auto. Without 0008-overlay-xino
// FSCONFIG_CMD_CREATE fails with EINVAL and runc copies its binary into a
// memfd instead.
func TestRuncSealedExe(t *testing.T) {
	need(t, asRoot)
	needNamespaces(t, asRoot) // sealexe comes in by a bind mount
	needPatch(t, "0008-overlay-xino")
	bin := sealexeBin(t)
	tmp := privateTmp(t, asRoot)
	r := runRungv(t, asRoot, tmp, "", "run", "--rm", "--privileged",
		"--mount", "type=bind,src="+bin+",dst=/xbin,readonly", imageRef,
		"sh", "-c", "mkdir -p /tmp/runc-state && /xbin/sealexe /tmp/runc-state")
	out := r.stdout
	if r.code != 0 || !strings.HasSuffix(out, "result: sealed\n") {
		t.Fatalf("runc's sealed-exe sequence in the episode: exit %d\n%s%s", r.code, out, r.stderr)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		name, res, _ := strings.Cut(l, ": ")
		if strings.Contains(name, "write") || strings.Contains(name, "-in-mount") {
			if !strings.HasPrefix(res, "refused ") {
				t.Errorf("%s: %s", name, res)
			}
		}
	}
	if !strings.Contains(out, "\nxino-on-create: refused EINVAL\n") {
		t.Errorf("an overlay with xino=on was not refused:\n%s", out)
	}
	if !strings.Contains(out, "child: running /sealexe") || strings.Count(out, ": refused ") != 10 {
		t.Fatalf("unexpected steps:\n%s", out)
	}
	t.Logf("in the episode:\n%s", out)
}

// runcDebugWrapper is a runtime for dockerd: runc with --debug, its log
// kept in /xlog/runc.log instead of the bundle's log.json (which the shim
// removes with the container).
const runcDebugWrapper = `#!/bin/sh
skip=
for a do
	shift
	if [ -n "$skip" ]; then skip=; set -- "$@" /xlog/runc.log; continue; fi
	case $a in
	--log) skip=1; set -- "$@" "$a" ;;
	--log=*) set -- "$@" --log=/xlog/runc.log ;;
	*) set -- "$@" "$a" ;;
	esac
done
exec runc --debug "$@"
`

// TestRuncSealedExeDocker is issue 25's second check: inside a Docker
// episode (sid's Docker 28 and runc 1.3) a docker run and a docker exec
// through runc --debug log "using overlayfs for sealed /proc/self/exe"
// and never fall back to copying runc's binary into a memfd. It needs
// 0008-overlay-xino and skips, saying so, without it.
func TestRuncSealedExeDocker(t *testing.T) {
	s := needDind(t, dindtest.Sid)
	needPatch(t, "0008-overlay-xino")
	conf, xlog := privateTmp(t, asRoot), privateTmp(t, asRoot)
	if err := os.Chmod(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(conf, "runc-debug"), []byte(runcDebugWrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(conf, "daemon.json"), []byte(`{"runtimes": {"dbg": {"path": "/etc/docker/runc-debug"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tmp, sockDir := privateTmp(t, asRoot), privateTmp(t, asRoot)
	d := startDaemon(t, s, asRoot, tmp, sockDir, "type=tmpfs,dst=/var/lib/docker",
		"--mount", "type=bind,src="+conf+",dst=/etc/docker,readonly",
		"--mount", "type=bind,src="+xlog+",dst=/xlog")
	d.must("load", "-i", s.hello)
	if out := d.must("run", "--rm", "--runtime", "dbg", "hello:latest", "echo", "ran"); strings.TrimSpace(out) != "ran" {
		t.Fatalf("docker run printed %q", out)
	}
	d.must("run", "-d", "--name", "c1", "--runtime", "dbg", "hello:latest", "sleep", "1000")
	if out := d.must("exec", "c1", "echo", "execd"); strings.TrimSpace(out) != "execd" {
		t.Fatalf("docker exec printed %q", out)
	}
	d.must("rm", "-f", "c1")
	d.stop()
	b, err := os.ReadFile(filepath.Join(xlog, "runc.log"))
	if err != nil {
		t.Fatalf("runc's debug log: %v (did dockerd use the dbg runtime?)", err)
	}
	log := string(b)
	sealed := strings.Count(log, "using overlayfs for sealed /proc/self/exe")
	copied := strings.Count(log, "falling back to making a temporary copy")
	t.Logf("runc --debug: %d sealed overlays, %d memfd copies", sealed, copied)
	// One for the run's create, one for the detached container's create,
	// one for the exec.
	if sealed < 3 || copied != 0 {
		var lines []string
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(l, "exeseal") || strings.Contains(l, "overlayfs") {
				lines = append(lines, l)
			}
		}
		t.Fatalf("runc copied its binary (%d) instead of sealing it in an overlay (%d):\n%s", copied, sealed, strings.Join(lines, "\n"))
	}
}
