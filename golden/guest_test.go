package golden

import (
	"io"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/image"
)

// TestShellQuote runs quoted words through a real shell.
func TestShellQuote(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh here")
	}
	words := []string{"plain", "it's", `"double" $HOME`, "new\nline", "", "a'b'c", "--flag=$(id)"}
	out, err := exec.Command(sh, "-c", "printf '%s\\0' "+shellQuote(words...)).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if !reflect.DeepEqual(got, words) {
		t.Fatalf("got %q, want %q", got, words)
	}
}

// TestGuestScriptSyntax: the generated script parses (sh -n).
func TestGuestScriptSyntax(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh here")
	}
	s := guestScript([]string{"/usr/local/bin/dockerd-entrypoint.sh"}, []string{"/gvx-golden/load/0/it's.tar"}, []string{"--iptables=false"}, 10)
	if out, err := exec.Command(sh, "-n", "-c", s).CombinedOutput(); err != nil {
		t.Fatalf("sh -n: %v %s\n%s", err, out, s)
	}
}

// TestDaemonFlags: the daemon listens on the guest socket only, unless
// told otherwise.
func TestDaemonFlags(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{nil, []string{"--host=unix:///var/run/docker.sock"}},
		{[]string{"--iptables=false"}, []string{"--iptables=false", "--host=unix:///var/run/docker.sock"}},
		{[]string{"-H", "tcp://0.0.0.0:2375"}, []string{"-H", "tcp://0.0.0.0:2375"}},
		{[]string{"--host=unix:///x.sock"}, []string{"--host=unix:///x.sock"}},
		{[]string{"-H=fd://"}, []string{"-H=fd://"}},
		{[]string{"--hostname-ish"}, []string{"--hostname-ish", "--host=unix:///var/run/docker.sock"}},
	} {
		if got := daemonFlags(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %q, want %q", c.in, got, c.want)
		}
	}
}

// TestDaemonArgv: a dind entrypoint gets the Sentry's flags (as rungv run
// adds them) after the caller's, unless the caller gave them.
func TestDaemonArgv(t *testing.T) {
	for _, c := range []struct{ cmd, extra, want []string }{
		{[]string{"dockerd-entrypoint.sh"}, nil, []string{"dockerd-entrypoint.sh", "--host=unix:///var/run/docker.sock", "--iptables=false", "--ip6tables=false"}},
		{[]string{"dockerd"}, []string{"--iptables=true", "-H", "fd://"}, []string{"dockerd", "--iptables=true", "-H", "fd://", "--ip6tables=false"}},
	} {
		if got := daemonArgv(c.cmd, c.extra); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q %q: %q, want %q", c.cmd, c.extra, got, c.want)
		}
	}
}

// TestDaemonCommand: docker:dind's entrypoint (by any path, with a Cmd of
// flags) is what starts the daemon; anything else falls back to
// dockerd-entrypoint.sh.
func TestDaemonCommand(t *testing.T) {
	for _, c := range []struct {
		entry, cmd, want []string
	}{
		{[]string{"dockerd-entrypoint.sh"}, nil, []string{"dockerd-entrypoint.sh"}},
		{[]string{"/usr/local/bin/dockerd-entrypoint.sh"}, []string{"--tls=false"}, []string{"/usr/local/bin/dockerd-entrypoint.sh", "--tls=false"}},
		{[]string{"dockerd"}, []string{"sh"}, []string{"dockerd"}},
		{nil, []string{"sh"}, []string{"dockerd-entrypoint.sh"}},
		{[]string{"/bin/tini", "--"}, nil, []string{"dockerd-entrypoint.sh"}},
	} {
		if got := daemonCommand(&image.Config{Entrypoint: c.entry, Cmd: c.cmd}); !reflect.DeepEqual(got, c.want) {
			t.Errorf("entrypoint %q cmd %q: %q, want %q", c.entry, c.cmd, got, c.want)
		}
	}
}

func TestParseGuest(t *testing.T) {
	in := `GVX-READY
GVX-STEP load /gvx-golden/load/0/a.tar
Loaded image: a:latest
GVX-STEP pull python:3.11-slim
GVX-IMAGE a:latest sha256:aa <none> 4.1MB
GVX-IMAGE python:3.11-slim sha256:bb sha256:cc 130 MB
GVX-STOPPED 0
`
	var steps []string
	rep := parseGuest(strings.NewReader(in), func(k, a string) { steps = append(steps, k+"="+a) })
	want := []Image{{Ref: "a:latest", ID: "sha256:aa", Size: "4.1MB"}, {Ref: "python:3.11-slim", ID: "sha256:bb", Digest: "sha256:cc", Size: "130 MB"}}
	if !rep.ready || !rep.stopped || rep.status != 0 || rep.fail != "" || !reflect.DeepEqual(rep.images, want) {
		t.Errorf("report %+v", rep)
	}
	if got := strings.Join(steps, "|"); got != "ready=|load=/gvx-golden/load/0/a.tar|output=Loaded image: a:latest|pull=python:3.11-slim|stopped=0" {
		t.Errorf("steps %s", got)
	}
	rep = parseGuest(strings.NewReader("GVX-READY\nGVX-FAIL docker load -i x\nerr1\nerr2\n"), func(string, string) {})
	if rep.fail != "docker load -i x" || strings.Join(rep.tail, ",") != "err1,err2" || rep.stopped {
		t.Errorf("failure report %+v", rep)
	}
}

// FuzzParseGuest: the guest's output is untrusted; parsing it never
// panics, never keeps more than 40 tail lines, and never blocks.
func FuzzParseGuest(f *testing.F) {
	f.Add([]byte("GVX-READY\nGVX-IMAGE a:b sha256:x <none> 1 MB\nGVX-STOPPED 0\n"))
	f.Add([]byte("GVX-IMAGE\nGVX-IMAGE a\nGVX-STEP\nGVX-STOPPED x\n" + strings.Repeat("y", 70000)))
	f.Fuzz(func(t *testing.T, b []byte) {
		rep := parseGuest(strings.NewReader(string(b)), func(string, string) {})
		if len(rep.tail) > 40 || len(rep.images) > maxImages {
			t.Fatalf("%d tail lines, %d images", len(rep.tail), len(rep.images))
		}
		for _, im := range rep.images {
			if im.Ref == "" || im.ID == "" {
				t.Fatalf("image without ref or id: %+v", im)
			}
		}
	})
}

// TestGuestLinesLoggedQuoted plays a daemon image whose output holds an
// escape sequence, a carriage return that overwrites the line with one of
// Build's own ("daemon stopped (status 0)") and a load argument with a
// newline escape: Build's log must show each guest line as one line, with
// no control character, and its errors likewise (they were printed raw).
func TestGuestLinesLoggedQuoted(t *testing.T) {
	in := "GVX-READY\n" +
		"\x1b]0;pwned\x07\x1b[2J\n" +
		"junk\rdaemon stopped (status 0)\n" +
		"GVX-STEP load /x\x1b[8m\n" +
		"GVX-STOPPED 0\x1b[1A\n"
	var log strings.Builder
	rep := parseGuest(strings.NewReader(in), logProgress(&log, time.Now()))
	got := log.String()
	if strings.ContainsFunc(got, func(r rune) bool { return r < 0x20 && r != '\n' || r == 0x7f }) {
		t.Errorf("the log holds the guest's control characters:\n%q", got)
	}
	if n := strings.Count(got, "\n"); n != 5 {
		t.Errorf("%d log lines for 5 reports:\n%s", n, got)
	}
	if !strings.Contains(got, `  "\x1b]0;pwned\a\x1b[2J"`) || !strings.Contains(got, `  "junk\rdaemon stopped (status 0)"`) {
		t.Errorf("the guest's lines are not quoted:\n%s", got)
	}
	if e := guestLines(rep.tail); strings.ContainsFunc(e, func(r rune) bool { return r < 0x20 && r != '\n' }) {
		t.Errorf("an error's guest lines hold control characters: %q", e)
	}
	var tail tailWriter
	tail.Write([]byte("err\x1b[2J\r\nforged\n"))
	if s := tail.suffix(); strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 && r != '\n' }) {
		t.Errorf("the stderr tail holds control characters: %q", s)
	}
}

// TestParseGuestImagesBounded plays a daemon image that prints GVX-IMAGE
// lines without end, long ones and many: parseGuest keeps at most
// maxImages of at most maxImageLine bytes each, so the host's memory for
// the summary stays bounded (before, every line was kept: the host's memory
// grew with whatever the guest printed, up to 1 MiB a line).
func TestParseGuestImagesBounded(t *testing.T) {
	long := strings.Repeat("x", 64<<10)
	pr, pw := io.Pipe()
	go func() {
		defer pw.Close()
		line := []byte("GVX-IMAGE " + long + " sha256:aa <none> 1 MB\n")
		for i := 0; i < 2000; i++ {
			if _, err := pw.Write(line); err != nil {
				return
			}
		}
		short := []byte("GVX-IMAGE a:b sha256:aa <none> 1 MB\n")
		for i := 0; i < 3*maxImages; i++ {
			if _, err := pw.Write(short); err != nil {
				return
			}
		}
	}()
	rep := parseGuest(pr, func(string, string) {})
	if len(rep.images) != maxImages {
		t.Fatalf("%d images kept, want the cap %d", len(rep.images), maxImages)
	}
	for _, im := range rep.images {
		if len(im.Ref) > maxImageLine {
			t.Fatalf("an image line of %d bytes was kept", len(im.Ref))
		}
	}
}
