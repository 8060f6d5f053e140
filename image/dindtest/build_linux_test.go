package dindtest

import (
	"archive/tar"
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// TestBuild builds (or finds in the shared test cache) each flavour of the
// real image and checks what the dind tests rely on.
func TestBuild(t *testing.T) {
	for _, f := range Flavours {
		t.Run(f.Name, func(t *testing.T) { testBuild(t, f) })
	}
}

// flavourFiles are the files each flavour must have beyond the common ones.
var flavourFiles = map[string][]string{
	"sid": {"usr/libexec/docker/cli-plugins/docker-compose", "usr/libexec/docker/cli-plugins/docker-buildx"},
}

func testBuild(t *testing.T, f Flavour) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	dir, err := f.Build(ctx, "")
	if IsUnavailable(err) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	// A published entry is returned without any work: even a cancelled
	// context gets it.
	done, stop := context.WithCancel(context.Background())
	stop()
	if again, err := f.Build(done, ""); err != nil || again != dir {
		t.Fatalf("second Build: %q, %v; want %q at once", again, err, dir)
	}

	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 || im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != Ref {
		t.Fatalf("index: %+v, %v", im, err)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != Entrypoint || len(cf.Config.Cmd) != 0 || len(cf.Config.Env) == 0 {
		t.Errorf("config: %+v", cf.Config)
	}
	ls, err := img.Layers()
	if err != nil || len(ls) != 1 {
		t.Fatalf("layers: %d, %v", len(ls), err)
	}
	if mt, _ := ls[0].MediaType(); mt != types.OCIUncompressedLayer {
		t.Errorf("layer media type %s", mt)
	}
	rc, err := ls[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got := tarNames(t, rc)
	for _, n := range append([]string{"usr/sbin/dockerd", "usr/bin/docker", "usr/bin/containerd", "usr/sbin/runc", "usr/sbin/iptables-legacy", "etc/ssl/certs/ca-certificates.crt"}, flavourFiles[f.Name]...) {
		if got[n] == nil {
			t.Errorf("image lacks %s", n)
		}
	}
	if h := got["usr/local/bin/"+Entrypoint]; h == nil || h.Typeflag != tar.TypeReg || h.Mode&0o111 == 0 {
		t.Errorf("entrypoint: %+v", h)
	}
	for _, alt := range []string{"iptables", "ip6tables"} {
		if h := got["etc/alternatives/"+alt]; h == nil || h.Linkname != "/usr/sbin/"+alt+"-legacy" {
			t.Errorf("%s alternative: %+v, want the legacy variant", alt, h)
		}
	}
	for n, h := range got {
		if len(n) > len("var/lib/apt/lists/") && n[:len("var/lib/apt/lists/")] == "var/lib/apt/lists/" && h.Typeflag == tar.TypeReg && h.Size > 0 {
			t.Errorf("apt list left in the image: %s", n)
		}
		if len(n) > 4 && n[:4] == "dev/" || len(n) > 5 && n[:5] == "proc/" {
			t.Errorf("%s packed", n)
		}
	}
}

// TestExtractCLI: the sid image's docker CLI and its Compose v2 and buildx
// plugins come out runnable on this host.
func TestExtractCLI(t *testing.T) {
	c, err := ExtractCLI(Sid.Layout(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(c.Plugins, "docker-compose") || !slices.Contains(c.Plugins, "docker-buildx") {
		t.Fatalf("plugins %q, want docker-compose and docker-buildx", c.Plugins)
	}
	for _, args := range [][]string{{"--version"}, {"compose", "version"}, {"buildx", "version"}} {
		cmd := exec.Command(c.Docker, args...)
		cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+c.Config)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("docker %q: %v\n%s", args, err, out)
		}
		t.Logf("docker %s: %s", strings.Join(args, " "), strings.TrimSpace(string(out)))
	}
	if _, err := ExtractCLI(t.TempDir(), t.TempDir()); err == nil {
		t.Error("ExtractCLI of an empty directory did not fail")
	}
}
