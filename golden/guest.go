package golden

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"z.gfire.dev/gvx/runtime/dind"
)

// The guest side of Build is one POSIX shell script run as the daemon
// image's entrypoint (sh -c): it starts the daemon with the image's own
// daemon command (daemonCommand: docker:dind's dockerd-entrypoint.sh),
// waits for `docker info`, loads the tars with the image's docker CLI,
// lists the images, and stops the daemon with SIGTERM so it flushes and
// unmounts its state cleanly before the volume is compacted. It reports
// to the host with lines on standard output that begin with a tag; every
// other line is the docker CLI's own output.
//
// The docker CLI inside talks to the daemon over the guest's own socket.
// rungv could publish it on the host (-p unix:SOCK:2375), but the guest
// script needs no docker CLI on the host, keeps the daemon's API off the
// host entirely, starts and stops the daemon in one place, and sends the
// tars through read-only bind mounts of their directories (--pull archives
// too, written on the host) instead of a byte stream through the
// sandbox's port forwarding.
const (
	tagReady   = "GVX-READY"   // GVX-READY
	tagStep    = "GVX-STEP"    // GVX-STEP load ARG
	tagImage   = "GVX-IMAGE"   // GVX-IMAGE REPO:TAG ID DIGEST SIZE
	tagFail    = "GVX-FAIL"    // GVX-FAIL what (the daemon log's tail follows)
	tagStopped = "GVX-STOPPED" // GVX-STOPPED STATUS
)

// guestSocket is where the daemon listens in the guest, and the docker
// CLI's default.
const guestSocket = "unix:///var/run/docker.sock"

// daemonFlags are the dockerd flags: extra, plus --host=guestSocket
// unless extra names a host. The guest has no network, so a TCP listener
// (what dind entrypoints add when given no host) would serve no one, and
// dockerd delays its start by 15 seconds to warn about one without TLS.
func daemonFlags(extra []string) []string {
	for _, a := range extra {
		if a == "-H" || a == "--host" || strings.HasPrefix(a, "-H=") || strings.HasPrefix(a, "--host=") {
			return extra
		}
	}
	return append(append([]string(nil), extra...), "--host="+guestSocket)
}

// daemonArgv is the whole daemon command line: command, daemonFlags(extra)
// and what the Sentry needs (dind.AddFlags: the same flags rungv run adds
// to a docker:dind command; a flag extra gives wins).
func daemonArgv(command, extra []string) []string {
	return append(append([]string(nil), command...), dind.AddFlags(daemonFlags(extra))...)
}

// stopSecs is how long the daemon may take to stop.
const stopSecs = 60

// guestScript returns the script that starts the daemon with command
// (daemonCommand) and extra dockerd flags, waits at most readySecs for it
// and loads loads (guest paths).
func guestScript(command, loads, daemonArgs []string, readySecs int) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	w("set -u")
	w("log=/tmp/gvx-golden-dockerd.log")
	w("fail() { echo %s \"$1\"; tail -n 40 \"$log\" 2>/dev/null; kill -TERM \"$pid\" 2>/dev/null; exit 3; }", tagFail)
	w("%s >\"$log\" 2>&1 &", shellQuote(daemonArgv(command, daemonArgs)...))
	w("pid=$!")
	w("i=0")
	w("until docker info >/dev/null 2>&1; do")
	w("  kill -0 \"$pid\" 2>/dev/null || fail 'the daemon exited before it was ready'")
	w("  i=$((i+1)); [ \"$i\" -le %d ] || fail 'the daemon was not ready in %ds'", readySecs*5, readySecs)
	w("  sleep 0.2")
	w("done")
	w("echo %s", tagReady)
	for _, l := range loads {
		w("echo %s load %s", tagStep, shellQuote(l))
		w("docker load -i %s || fail %s", shellQuote(l), shellQuote("docker load -i "+l))
	}
	w("docker image ls --digests --no-trunc --format '%s {{.Repository}}:{{.Tag}} {{.ID}} {{.Digest}} {{.Size}}' || fail 'docker image ls'", tagImage)
	// SIGTERM, not the seeds' SIGINT: a job started with & in a
	// non-interactive shell ignores SIGINT. dockerd shuts down cleanly
	// on either; one that does not stop in stopSecs is killed, and the
	// build fails.
	w("kill -TERM \"$pid\"")
	w("( sleep %d; kill -KILL \"$pid\" ) 2>/dev/null &", stopSecs)
	w("dog=$!")
	w("wait \"$pid\"")
	w("st=$?")
	w("kill \"$dog\" 2>/dev/null")
	w("echo %s \"$st\"", tagStopped)
	w("[ \"$st\" -eq 0 ] || { tail -n 40 \"$log\"; exit 4; }")
	return b.String()
}

// shellQuote quotes words for a POSIX shell.
func shellQuote(words ...string) string {
	q := make([]string, len(words))
	for i, s := range words {
		q[i] = "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// Image is one image in the golden volume.
type Image struct {
	Ref    string `json:"ref"`              // repository:tag
	ID     string `json:"id"`               // config digest (sha256:…)
	Digest string `json:"digest,omitempty"` // repo digest, for pulled images
	Size   string `json:"size"`             // as docker prints it
}

// report is what the guest said.
type report struct {
	ready   bool
	stopped bool
	status  int // the daemon's exit status, when stopped
	fail    string
	images  []Image
	tail    []string // the last untagged lines (docker's output, the daemon log)
}

// What parseGuest keeps of the guest's image list: the guest may print
// GVX-IMAGE lines without end (each up to the scanner's 1 MiB), and every
// one kept is host memory. A real line is a reference, two digests and a
// size (well under 1 KiB); a daemon of more than maxImages images is not
// a golden volume anyone meant.
const (
	maxImages    = 4096
	maxImageLine = 1 << 10
)

// parseGuest reads the guest's standard output, calling progress for each
// step, until EOF. It never fails: unknown lines are kept in tail, image
// lines past maxImages or maxImageLine bytes are dropped.
func parseGuest(r io.Reader, progress func(kind, arg string)) *report {
	rep := &report{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		tag, rest, _ := strings.Cut(line, " ")
		switch tag {
		case tagReady:
			rep.ready = true
			progress("ready", "")
		case tagStep:
			kind, arg, _ := strings.Cut(rest, " ")
			progress(kind, arg)
		case tagImage:
			f := strings.Fields(rest)
			if len(f) >= 3 && len(rep.images) < maxImages && len(rest) <= maxImageLine {
				im := Image{Ref: f[0], ID: f[1], Size: strings.Join(f[3:], " ")}
				if f[2] != "<none>" {
					im.Digest = f[2]
				}
				rep.images = append(rep.images, im)
			}
		case tagFail:
			rep.fail = rest
		case tagStopped:
			rep.stopped = true
			rep.status, _ = strconv.Atoi(strings.TrimSpace(rest))
			progress("stopped", rest)
		default:
			rep.tail = append(rep.tail, line)
			if len(rep.tail) > 40 {
				rep.tail = rep.tail[1:]
			}
			progress("output", line)
		}
	}
	_, _ = io.Copy(io.Discard, r) // a line over 1 MiB: drain, do not block the guest
	return rep
}
