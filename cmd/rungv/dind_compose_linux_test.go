package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"z.gfire.dev/gvx/image/dindtest"
)

// Compose v2 projects on their default (user-defined) network, as coding
// tasks use them: testdata/dind-compose/compose.yaml.

// composeProject copies the test project into a directory u may read.
func composeProject(t *testing.T, u user) string {
	t.Helper()
	dir := privateTmp(t, u)
	yml, err := os.ReadFile(filepath.Join("testdata", "dind-compose", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), yml, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkSuite fails t unless the project's test runner passed all three
// name checks (service name, alias, container name).
func checkSuite(t *testing.T, out string) {
	t.Helper()
	for _, c := range []string{"PASS service-name", "PASS alias", "PASS container-name"} {
		if !strings.Contains(out, c) {
			t.Fatalf("the test runner did not report %q:\n%s", c, out)
		}
	}
}

// TestDindComposeProject: with each daemon flavour (as nobody,
// /var/lib/docker on an ext4lite volume), Compose v2 from the host (sid's
// CLI and plugin, through the published socket) runs the three-service
// project: `up --abort-on-container-exit --exit-code-from tests` returns
// the runner's code (0, then 3 when the suite adds 3), the services reach
// each other by service name, alias and container name on the project
// network, depends_on waits for healthchecks, and logs, exec and down -v
// work.
func TestDindComposeProject(t *testing.T) { forEachFlavour(t, testDindComposeProject) }

func testDindComposeProject(t *testing.T, s dindSetup) {
	d := startOnVolume(t, s)
	proj := composeProject(t, asRoot)
	compose := func(extraEnv []string, args ...string) (string, int) {
		t.Helper()
		c := boundedCommand(d.cli, append([]string{"-H", "unix://" + d.sock, "compose", "-p", "gvxproj"}, args...)...)
		c.Dir = proj
		c.Env = append(append(os.Environ(), d.env...), extraEnv...)
		out, err := c.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("docker compose %v: %v", args, err)
		}
		return string(out), c.ProcessState.ExitCode()
	}
	mustCompose := func(args ...string) string {
		t.Helper()
		out, code := compose(nil, args...)
		if code != 0 {
			t.Fatalf("docker compose %v: exit %d\n%s\ndaemon:\n%s", args, code, out, tail(d.log.String()))
		}
		return out
	}
	up := []string{"up", "--no-color", "--abort-on-container-exit", "--exit-code-from", "tests"}
	out := mustCompose(up...)
	checkSuite(t, out)
	if out, code := compose([]string{"SUITE_EXTRA=3"}, up...); code != 3 || !strings.Contains(out, "suite exits 3") {
		t.Fatalf("up with a suite that exits 3 returned %d:\n%s", code, out)
	}
	if out := mustCompose("logs", "--no-color", "db"); !strings.Contains(out, "db ready") {
		t.Errorf("compose logs db: %q", out)
	}
	mustCompose("up", "-d", "--wait", "web")
	if out := mustCompose("exec", "-T", "web", "sh", "-c", "nc -w 2 db 5432 </dev/null"); strings.TrimSpace(out) != "db-pong" {
		t.Errorf("compose exec web → db: %q", out)
	}
	mustCompose("down", "-v")
	if out := d.must("ps", "-aq"); strings.TrimSpace(out) != "" {
		t.Errorf("containers left after down -v: %q", out)
	}
	if out := d.must("volume", "ls", "-q"); strings.Contains(out, "gvxproj_dbdata") {
		t.Errorf("volume left after down -v: %q", out)
	}
	if out := d.must("network", "ls", "--format", "{{.Name}}"); strings.Contains(out, "gvxproj_default") {
		t.Errorf("network left after down -v: %q", out)
	}
	d.finish()
}

// TestDindComposeInside: the CLI inside the episode (sid's docker and
// Compose v2, as nobody, /var/lib/docker on a volume): the episode's
// command is a script that starts the daemon itself, loads the image and
// runs the project; rungv run exits with the suite's code. A script is not
// a known dind command, so it passes the daemon's flags and rungv's socket
// flags itself (docs/dind.md).
func TestDindComposeInside(t *testing.T) {
	s := needDind(t, dindtest.Sid)
	need(t, asNobody)
	tmp := privateTmp(t, asNobody)
	vol := newVolume(t, asNobody, 4<<30)
	proj := composeProject(t, asNobody)
	script := `set -e
dockerd-entrypoint.sh --iptables=false --ip6tables=false >/tmp/dockerd.log 2>&1 &
i=0
until docker info >/dev/null 2>&1; do
	i=$((i + 1)); [ $i -lt 600 ] || { cat /tmp/dockerd.log; exit 90; }; sleep 0.1
done
docker version --format 'inside: server {{.Server.Version}}, client {{.Client.Version}}'
docker compose version
docker load -q -i /hello.tar
cd /proj
set +e
docker compose -p inner up --no-color --abort-on-container-exit --exit-code-from tests
code=$?
docker compose -p inner down -v >/dev/null 2>&1
exit $code
`
	r := runRungv(t, asNobody, tmp, "", "run", "--rm", "--net-raw", "--allow-packet-socket-write",
		"-e", "DOCKER_TLS_CERTDIR=",
		"--mount", "type=volume,src="+vol+",dst=/var/lib/docker",
		"--mount", "type=bind,src="+proj+",dst=/proj,ro",
		"--mount", "type=bind,src="+s.hello+",dst=/hello.tar,ro",
		"oci:"+s.layout, "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("the episode exited %d\nstdout:\n%s\nstderr:\n%s", r.code, tail(r.stdout), tail(r.stderr))
	}
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, "inside:") || strings.HasPrefix(l, "Docker Compose version") {
			t.Log(l)
		}
	}
	checkSuite(t, r.stdout)
	checkClean(t, tmp)
	e2fsck(t, vol)
}
