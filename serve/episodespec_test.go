package serve

import (
	"path/filepath"
	"slices"
	"testing"

	"z.gfire.dev/gvx/agent"
	"z.gfire.dev/gvx/spec"
)

// TestEpisodeSpecDaemon: a privileged episode's service is started by the
// agent in daemon mode (agent.DaemonCommand: the Sentry's dockerd flags and
// --tls=false unless the guest's environment sets TLS up, so the
// `docker: true` recipe does not wait dockerd's 15 s); an unprivileged
// one's is started as given (agent.Command).
func TestEpisodeSpecDaemon(t *testing.T) {
	s := &Server{cfg: Config{AgentPort: agent.DefaultPort}}
	for _, priv := range []bool{true, false} {
		dir := t.TempDir()
		e := &episode{dir: dir, dockerSock: filepath.Join(dir, dockerSock)}
		req := &CreateRequest{Docker: true, Spec: &spec.Spec{Version: spec.Version, Image: "oci:/srv/images/dind", Privileged: priv,
			Entrypoint: []string{"dockerd-entrypoint.sh"}, Env: []string{"DOCKER_TLS_CERTDIR="}}}
		sp, err := s.episodeSpec(req, e)
		if err != nil {
			t.Fatal(err)
		}
		want := agent.Command(agent.DefaultPort, []string{"dockerd-entrypoint.sh"})
		if priv {
			want = agent.DaemonCommand(agent.DefaultPort, []string{"dockerd-entrypoint.sh"})
		}
		if !slices.Equal(sp.Entrypoint, want) {
			t.Errorf("privileged %v: entrypoint %q, want %q", priv, sp.Entrypoint, want)
		}
	}
}
