package image

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Config is what the runtime needs from an image's configuration to start
// its process. It is stored in the cache as JSON beside the EROFS file,
// named by the image configuration's digest.
type Config struct {
	// Digest is the sha256 of the image configuration blob it was taken from.
	Digest       string            `json:"digest"`
	Platform     string            `json:"platform,omitempty"` // os/arch[/variant]
	Env          []string          `json:"env,omitempty"`
	Entrypoint   []string          `json:"entrypoint,omitempty"`
	Cmd          []string          `json:"cmd,omitempty"`
	WorkingDir   string            `json:"working_dir,omitempty"`
	User         string            `json:"user,omitempty"`
	ExposedPorts []string          `json:"exposed_ports,omitempty"` // sorted, "80/tcp"
	StopSignal   string            `json:"stop_signal,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Volumes      []string          `json:"volumes,omitempty"` // sorted
	// DiffIDs are the layers' uncompressed digests, lowest first.
	DiffIDs []string `json:"diff_ids"`
}

func configFrom(cf *v1.ConfigFile, digest v1.Hash) *Config {
	c := &Config{
		Digest:     digest.String(),
		Platform:   platformString(cf.Platform()),
		Env:        cf.Config.Env,
		Entrypoint: cf.Config.Entrypoint,
		Cmd:        cf.Config.Cmd,
		WorkingDir: cf.Config.WorkingDir,
		User:       cf.Config.User,
		StopSignal: cf.Config.StopSignal,
		Labels:     cf.Config.Labels,
		DiffIDs:    []string{},
	}
	for p := range cf.Config.ExposedPorts {
		c.ExposedPorts = append(c.ExposedPorts, p)
	}
	slices.Sort(c.ExposedPorts)
	for v := range cf.Config.Volumes {
		c.Volumes = append(c.Volumes, v)
	}
	slices.Sort(c.Volumes)
	for _, d := range cf.RootFS.DiffIDs {
		c.DiffIDs = append(c.DiffIDs, d.String())
	}
	return c
}

// maxConfigSize bounds ReadConfig: real configurations are kilobytes.
const maxConfigSize = 16 << 20

// ReadConfig reads a Config written by Add (Result.Config).
func ReadConfig(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxConfigSize {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrCorrupt, path, maxConfigSize)
	}
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	return &c, nil
}
