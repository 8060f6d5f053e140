package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"z.gfire.dev/gvx/erofs"
	"z.gfire.dev/gvx/erofs/cache"
	"z.gfire.dev/gvx/overlay"
	"z.gfire.dev/gvx/sink"
)

// Options tune Add.
type Options struct {
	// Profile is the EROFS profile: "runtime" (the default when empty:
	// flat-plain and xattr-free, what gVisor mounts) or "full".
	Profile string
	// Platform picks from multi-platform images, "os/arch[/variant]";
	// empty means DefaultPlatform. When set, a single-platform image of
	// another platform is refused too.
	Platform string
	// Keychain supplies registry credentials; nil means
	// authn.DefaultKeychain (the docker config: $DOCKER_CONFIG or
	// ~/.docker/config.json, with its credential helpers).
	Keychain authn.Keychain
	// Transport is the HTTP transport for registries; nil means the default.
	Transport http.RoundTripper
	// Progress, if set, is called as layer blobs are read, with the bytes
	// read so far and the total (compressed) size of the layers. Registry
	// and OCI layout sources only.
	Progress func(done, total int64)
	// MemoryLimit is how much file data the EROFS builder keeps in memory
	// before spooling to the cache's tmp directory (erofs.Options).
	MemoryLimit int64
	// InsecureRegistries are registries (HOST[:PORT], as in the
	// reference) spoken to over plain HTTP. Loopback, *.local and private
	// (RFC 1918) addresses always are (go-containerregistry's rule).
	InsecureRegistries []string
	// Tags are local names (NAME[:TAG], see NormalizeName) Add also
	// records for the image, in the same index update: `docker tag` in
	// the cache. Resolve and the rest ignore them.
	Tags []string
}

// Result describes an image in the cache.
type Result struct {
	// Ref is the canonical source (Source.String()); with Profile it names
	// the index entry.
	Ref string `json:"ref"`
	// Digest names the flattened image: "sha256:" + Key(diffIDs, profile).
	Digest string `json:"digest"`
	// EROFS is the flattened root filesystem's path inside the cache.
	EROFS string `json:"erofs"`
	// Config is the path of the image's Config JSON inside the cache.
	Config       string `json:"config"`
	Profile      string `json:"profile"`
	Platform     string `json:"platform,omitempty"`
	ImageDigest  string `json:"image_digest"`  // manifest digest at the source
	ConfigDigest string `json:"config_digest"` // image configuration digest
	Layers       int    `json:"layers"`
	Size         int64  `json:"size"` // bytes of the EROFS file
	// Source is, for a local name (Options.Tags, Tag), the source the
	// image was added from; empty for the entry of a source itself.
	Source string `json:"source,omitempty"`
	// Created is true when this call built the EROFS file; false when it
	// was already in the cache (or another process built it meanwhile).
	Created bool `json:"created"`
	// Dropped counts what the profile could not keep (xattrs for the
	// runtime profile); DroppedXattrs lists them (capped).
	Dropped       int       `json:"dropped"`
	DroppedXattrs []string  `json:"dropped_xattrs,omitempty"`
	Added         time.Time `json:"added"`
}

// Object name suffixes in the cache.
const (
	extEROFS  = ".erofs"
	extReport = ".report.json"
	extConfig = ".config.json"
)

// Add resolves src (see ParseSource), flattens its layers in order into
// an EROFS image and stores it in c under its content key, with the image
// Config beside it, and records src → entry in c's index. If the entry
// exists it is reused without reading any layer. Safe to run from many
// processes at once: one builds, the others wait and reuse its file.
func Add(ctx context.Context, c *cache.Cache, src string, o Options) (*Result, error) {
	prof := erofs.ProfileRuntime
	var err error
	if o.Profile != "" {
		if prof, err = erofs.ParseProfile(o.Profile); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadSource, err)
		}
	}
	tags, err := normalizeNames(o.Tags)
	if err != nil {
		return nil, err
	}
	r, err := newResolver(src, &o)
	if err != nil {
		return nil, err
	}
	s := r.src
	img, err := r.resolve(ctx)
	if err != nil {
		return nil, err
	}

	// Everything the cache entry is named by, checked before it is trusted.
	rawCfg, err := img.RawConfigFile()
	if err != nil {
		return nil, r.wrap(err)
	}
	cfgDigest, err := img.ConfigName()
	if err != nil {
		return nil, r.wrap(err)
	}
	if sum := sha256.Sum256(rawCfg); cfgDigest.Algorithm != "sha256" || cfgDigest.Hex != hex.EncodeToString(sum[:]) {
		return nil, fmt.Errorf("%w: %s: image configuration does not match its digest %s", ErrCorrupt, s, cfgDigest)
	}
	cf, err := v1.ParseConfigFile(bytes.NewReader(rawCfg))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: image configuration: %v", ErrCorrupt, s, err)
	}
	if cf.OS != "" && cf.OS != "linux" {
		return nil, fmt.Errorf("%w: %s is a %s image; gvx runs linux images", ErrUnsupported, s, cf.OS)
	}
	imgDigest, err := img.Digest()
	if err != nil {
		return nil, r.wrap(err)
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, r.wrap(err)
	}
	diffIDs := cf.RootFS.DiffIDs
	if len(diffIDs) != len(layers) {
		return nil, fmt.Errorf("%w: %s: %d layers but %d diffIDs in the configuration", ErrCorrupt, s, len(layers), len(diffIDs))
	}
	key, err := Key(diffIDs, prof)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s, err)
	}
	res := &Result{
		Ref:          s.String(),
		Digest:       "sha256:" + key,
		Profile:      prof.String(),
		Platform:     platformString(cf.Platform()),
		ImageDigest:  imgDigest.String(),
		ConfigDigest: cfgDigest.String(),
		Layers:       len(layers),
		Added:        time.Now().UTC().Truncate(time.Second),
	}

	pin, err := c.Pin()
	if err != nil {
		return nil, err
	}
	defer pin.Close()

	cfgJSON, err := json.MarshalIndent(configFrom(cf, cfgDigest), "", "  ")
	if err != nil {
		return nil, err
	}
	res.Config, _, err = pin.Ensure(cfgDigest.Hex+extConfig, func(f *os.File) error {
		_, err := f.Write(append(cfgJSON, '\n'))
		return err
	})
	if err != nil {
		return nil, err
	}

	fl := &flattener{ctx: ctx, src: s, prof: prof, c: c, pin: pin, key: key, layers: layers, diffIDs: diffIDs, o: &o}
	res.EROFS, res.Created, err = pin.Ensure(key+extEROFS, fl.build)
	if err != nil {
		return nil, err
	}
	rep, err := readReport(c, key)
	if err != nil {
		return nil, err
	}
	res.Size, res.Dropped, res.DroppedXattrs = rep.Bytes, rep.Dropped, rep.DroppedXattrs

	meta, err := json.Marshal(entryMeta(res))
	if err != nil {
		return nil, err
	}
	objects := []string{key + extEROFS, key + extReport, cfgDigest.Hex + extConfig}
	err = c.Update(func(ix *cache.Index) error {
		ix.Entries[entryName(res.Ref, res.Profile)] = cache.Entry{Objects: objects, Meta: meta}
		for _, t := range tags {
			if _, err := putName(ix, t, res, objects); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// flattener builds one cache entry's EROFS file.
type flattener struct {
	ctx     context.Context
	src     *Source
	prof    erofs.Profile
	c       *cache.Cache
	pin     *cache.Pin
	key     string
	layers  []v1.Layer
	diffIDs []v1.Hash
	o       *Options
}

func (fl *flattener) build(f *os.File) error {
	b := erofs.NewBuilder(erofs.Options{Profile: fl.prof, TempDir: fl.c.TempDir(), MemoryLimit: fl.o.MemoryLimit})
	defer b.Close()
	tr := newXattrTracker(b)
	prog := fl.progress()
	for i, l := range fl.layers {
		if err := fl.ctx.Err(); err != nil {
			return err
		}
		if err := fl.apply(tr, i, l, prog); err != nil {
			return err
		}
	}
	if _, err := b.WriteTo(f); err != nil {
		return err
	}
	// The report goes in before the image is renamed into place, so an
	// image in the cache always has one.
	er := b.Report()
	r := report{Profile: er.Profile.String(), Inodes: er.Inodes, Blocks: er.Blocks, Bytes: er.Bytes}
	if fl.prof == erofs.ProfileRuntime {
		r.DroppedXattrs, r.Dropped = tr.dropped()
	} else {
		r.DroppedXattrs, r.Dropped = er.Warnings, er.Dropped
	}
	rep, err := json.MarshalIndent(&r, "", "  ")
	if err != nil {
		return err
	}
	_, _, err = fl.pin.Ensure(fl.key+extReport, func(f *os.File) error {
		_, err := f.Write(append(rep, '\n'))
		return err
	})
	return err
}

type progress struct {
	done, total int64
	fn          func(done, total int64)
}

func (p *progress) Write(b []byte) (int, error) {
	p.done += int64(len(b))
	p.fn(p.done, p.total)
	return len(b), nil
}

func (fl *flattener) progress() *progress {
	if fl.o.Progress == nil || fl.src.Transport == DockerArchive {
		return nil
	}
	p := &progress{fn: fl.o.Progress}
	for _, l := range fl.layers {
		if n, err := l.Size(); err == nil {
			p.total += n
		}
	}
	p.fn(0, p.total)
	return p
}

// apply reads layer i, applies it onto b and checks it: the blob against
// its digest (compressed sources) and the uncompressed stream against its
// diffID. A blob that fails its digest is reported as ErrCorrupt even when
// the damage first shows as a broken archive.
func (fl *flattener) apply(b sink.Sink, i int, l v1.Layer, prog *progress) (err error) {
	fail := func(err error) error {
		return fmt.Errorf("%s: layer %d (%s): %w", fl.src, i, fl.diffIDs[i], err)
	}
	archive := fl.src.Transport == DockerArchive
	var rc io.ReadCloser
	if archive {
		// docker save stores layers uncompressed; Compressed would gzip them.
		rc, err = l.Uncompressed()
	} else {
		rc, err = l.Compressed()
	}
	if err != nil {
		return fail(err)
	}
	defer rc.Close()
	var raw io.Reader = rc
	if prog != nil {
		raw = io.TeeReader(raw, prog)
	}
	var blobHash hash.Hash
	r := raw
	if !archive {
		blobHash = sha256.New()
		raw = io.TeeReader(raw, blobHash)
		d, err := overlay.Decompress(raw)
		if err != nil {
			return fail(err)
		}
		defer d.Close()
		r = d
	}
	diffHash := sha256.New()
	r = io.TeeReader(r, diffHash)
	applyErr := overlay.ApplyLayer(b, r, overlay.LayerOptions{})
	if applyErr == nil {
		// Read to the end so the whole stream is hashed.
		_, applyErr = io.Copy(io.Discard, r)
	}
	if blobHash != nil {
		// Whatever happened, the blob's digest says whose fault it was.
		_, drainErr := io.Copy(io.Discard, raw)
		if want, err := l.Digest(); err == nil && hex.EncodeToString(blobHash.Sum(nil)) != want.Hex {
			return fail(fmt.Errorf("%w: blob does not match its digest %s", ErrCorrupt, want))
		}
		if applyErr == nil {
			applyErr = drainErr
		}
	}
	if applyErr != nil {
		return fail(applyErr)
	}
	if got := hex.EncodeToString(diffHash.Sum(nil)); got != fl.diffIDs[i].Hex {
		return fail(fmt.Errorf("%w: uncompressed content has sha256:%s", ErrCorrupt, got))
	}
	return nil
}

// report is kept beside each EROFS file (KEY.report.json).
type report struct {
	Profile       string   `json:"profile"`
	Inodes        int64    `json:"inodes"`
	Blocks        int64    `json:"blocks"`
	Bytes         int64    `json:"bytes"`
	Dropped       int      `json:"dropped"`
	DroppedXattrs []string `json:"dropped_xattrs,omitempty"`
}

func readReport(c *cache.Cache, key string) (*report, error) {
	p, err := c.Lookup(key + extReport)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, p, err)
	}
	return &rep, nil
}
