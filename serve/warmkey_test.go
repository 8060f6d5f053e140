package serve

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestWarmKey: a create claims from a warm set when it would boot the same
// episode: one that differs from the warm request only in TTL, lease or
// defaults it spells out (spec version, golden_target, docker_port, an
// empty entrypoint, the server's default memory) matches; one that
// differs in image, golden, mounts, limits, network, env, Docker,
// privilege or forkability does not. Before, any byte of difference in the
// request's JSON but TTL and lease made a create cold.
func TestWarmKey(t *testing.T) {
	dir := t.TempDir()
	golden, other := filepath.Join(dir, "golden.ext4"), filepath.Join(dir, "other.ext4")
	for _, p := range []string{golden, other} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := &Server{cfg: Config{DefaultMemory: 1 << 30}}
	key := func(js string) string {
		t.Helper()
		var req CreateRequest
		if err := json.Unmarshal([]byte(js), &req); err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		if err := s.checkRequest(&req); err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		k, err := s.warmKey(req)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	warm := key(`{"spec": {"image": "oci:/srv/dind", "env": ["A=1"]}, "golden": "` + golden + `", "docker": true}`)
	same := map[string]string{
		"ttl and lease":        `{"spec": {"image": "oci:/srv/dind", "env": ["A=1"]}, "golden": "` + golden + `", "docker": true, "ttl": 60, "lease": -1}`,
		"spec version":         `{"spec": {"version": 1, "image": "oci:/srv/dind", "env": ["A=1"]}, "golden": "` + golden + `", "docker": true}`,
		"golden_target":        `{"spec": {"image": "oci:/srv/dind", "env": ["A=1"]}, "golden": "` + golden + `", "golden_target": "/var/lib/docker/", "docker": true}`,
		"docker_port":          `{"spec": {"image": "oci:/srv/dind", "env": ["A=1"]}, "golden": "` + golden + `", "docker": true, "docker_port": 2375}`,
		"empty entrypoint":     `{"spec": {"image": "oci:/srv/dind", "env": ["A=1"], "entrypoint": []}, "golden": "` + golden + `", "docker": true}`,
		"default memory":       `{"spec": {"image": "oci:/srv/dind", "env": ["A=1"], "limits": {"memory_bytes": 1073741824` + bestEffort() + `}}, "golden": "` + golden + `", "docker": true}`,
		"golden path spelling": `{"spec": {"image": "oci:/srv/dind", "env": ["A=1"]}, "golden": "` + dir + `/./golden.ext4", "docker": true}`,
		"wait":                 `{"spec": {"image": "oci:/srv/dind", "env": ["A=1"]}, "golden": "` + golden + `", "docker": true, "wait": "agent"}`,
		"golden_durability":    `{"spec": {"image": "oci:/srv/dind", "env": ["A=1"]}, "golden": "` + golden + `", "golden_durability": "episode", "docker": true}`,
	}
	for name, js := range same {
		if k := key(js); k != warm {
			t.Errorf("%s: not a claim:\n%s\n%s", name, k, warm)
		}
	}
	differ := map[string]string{
		"image":             `{"spec": {"image": "oci:/srv/other", "env": ["A=1"]}, "golden": "` + golden + `", "docker": true}`,
		"golden":            `{"spec": {"image": "oci:/srv/dind", "env": ["A=1"]}, "golden": "` + other + `", "docker": true}`,
		"golden_target":     `{"spec": {"image": "oci:/srv/dind", "env": ["A=1"]}, "golden": "` + golden + `", "golden_target": "/data", "docker": true}`,
		"golden_durability": `{"spec": {"image": "oci:/srv/dind", "env": ["A=1"]}, "golden": "` + golden + `", "golden_durability": "full", "docker": true}`,
		"no golden":         `{"spec": {"image": "oci:/srv/dind", "env": ["A=1"]}, "docker": true}`,
		"mounts":            `{"spec": {"image": "oci:/srv/dind", "env": ["A=1"], "mounts": [{"type": "tmpfs", "target": "/tmp"}]}, "golden": "` + golden + `", "docker": true}`,
		"memory":            `{"spec": {"image": "oci:/srv/dind", "env": ["A=1"], "limits": {"memory_bytes": 536870912}}, "golden": "` + golden + `", "docker": true}`,
		"cpus":              `{"spec": {"image": "oci:/srv/dind", "env": ["A=1"], "limits": {"cpus": 1}}, "golden": "` + golden + `", "docker": true}`,
		"network":           `{"spec": {"image": "oci:/srv/dind", "env": ["A=1"], "network": "none"}, "golden": "` + golden + `", "docker": true}`,
		"env":               `{"spec": {"image": "oci:/srv/dind", "env": ["A=2"]}, "golden": "` + golden + `", "docker": true}`,
		"docker":            `{"spec": {"image": "oci:/srv/dind", "env": ["A=1"]}, "golden": "` + golden + `"}`,
		"docker_port":       `{"spec": {"image": "oci:/srv/dind", "env": ["A=1"]}, "golden": "` + golden + `", "docker": true, "docker_port": 2376}`,
		"privileged":        `{"spec": {"image": "oci:/srv/dind", "env": ["A=1"], "privileged": true}, "golden": "` + golden + `", "docker": true}`,
		"forkable":          `{"spec": {"image": "oci:/srv/dind", "env": ["A=1"]}, "golden": "` + golden + `", "docker": true, "forkable": true}`,
	}
	for name, js := range differ {
		if key(js) == warm {
			t.Errorf("%s differs, yet the create would claim the warm episode", name)
		}
	}
}

// bestEffort is what defaultLimits adds to a create without a memory
// limit where no host cgroup may enforce it (not root).
func bestEffort() string {
	if os.Geteuid() != 0 {
		return `, "policy": "best-effort"`
	}
	return ""
}
