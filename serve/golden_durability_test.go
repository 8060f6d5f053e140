package serve

import (
	"testing"

	"z.gfire.dev/gvx/spec"
)

// TestGoldenCloneDurabilityDefault: a golden's clone is mounted with
// durability "episode" unless the request asks for "full" (the clone is
// the episode's alone and deleted at close), and the mount the server
// builds carries what the request resolved to.
func TestGoldenCloneDurabilityDefault(t *testing.T) {
	s := &Server{cfg: Config{AgentPort: 7000}}
	for _, c := range []struct {
		asked, want spec.Durability
	}{{"", spec.DurabilityEpisode}, {spec.DurabilityEpisode, spec.DurabilityEpisode}, {spec.DurabilityFull, spec.DurabilityFull}} {
		req := &CreateRequest{Spec: &spec.Spec{Version: spec.Version, Image: "oci:/srv/x"}, Golden: "/srv/golden.ext4", GoldenDurability: c.asked}
		sp, err := s.episodeSpec(req, &episode{dir: "/srv/ep", vol: "/srv/ep/vol.ext4"})
		if err != nil {
			t.Fatal(err)
		}
		var got []spec.Durability
		for _, m := range sp.Mounts {
			if m.Type == spec.MountVolume && m.Source == "/srv/ep/vol.ext4" {
				got = append(got, m.Durability)
			}
		}
		if len(got) != 1 || got[0] != c.want {
			t.Errorf("golden_durability %q: the clone's mount has durability %v, want %q", c.asked, got, c.want)
		}
	}
}
