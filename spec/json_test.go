package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// full sets every field of a Spec to a value other than its zero value.
func full() *Spec {
	return &Spec{
		Version:    Version,
		Image:      "oci:/srv/images/dind",
		Pull:       PullNever,
		Entrypoint: []string{"sh", "-c"},
		Args:       []string{"dockerd-entrypoint.sh --tls=false"},
		Env:        []string{"DOCKER_TLS_CERTDIR=", "A=b=c"},
		User:       "1000:1000",
		Workdir:    "/work",
		Mounts: []Mount{
			{Type: MountVolume, Source: "/srv/ep,1=a/v.ext4", Target: "/var/lib/docker", Size: 8 << 30, MaxOpen: 1000, AllowForeignOwner: true, Durability: DurabilityEpisode},
			{Type: MountBind, Source: "/srv/in", Target: "/in", ReadOnly: true},
			{Type: MountTmpfs, Target: "/tmp"},
		},
		Ports:                  []Port{{HostSocket: "/run/ep.sock", GuestPort: 2375}, {HostAddr: "127.0.0.1:8080", GuestPort: 80}},
		Network:                NetworkNAT,
		Egress:                 []string{"allow=10.1.2.3:443", "deny=[2001:db8::]/32:25"},
		AllowHostPorts:         []int{5000},
		NATMaxRelays:           64,
		Limits:                 Limits{MemoryBytes: 4 << 30, CPUs: 1.5, Pids: 512, Policy: LimitsBestEffort},
		Privileged:             true,
		NetRaw:                 true,
		AllowPacketSocketWrite: true,
		AllowSUID:              true,
		Platform:               PlatformPtrace,
		Isolation:              IsolationNamespaces,
		Lockdown:               LockdownOff,
	}
}

// TestFullSetsEveryField keeps full() honest: a field added to Spec must
// be added there, or the round trip below proves nothing about it.
func TestFullSetsEveryField(t *testing.T) {
	v := reflect.ValueOf(*full())
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("full() leaves Spec.%s at its zero value", v.Type().Field(i).Name)
		}
	}
	m := reflect.ValueOf(full().Mounts[0])
	for i := range m.NumField() {
		if m.Field(i).IsZero() && m.Type().Field(i).Name != "ReadOnly" {
			t.Errorf("full().Mounts[0] leaves %s at its zero value", m.Type().Field(i).Name)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for name, s := range map[string]*Spec{
		"full":               full(),
		"minimal":            New("oci:/img"),
		"cleared entrypoint": {Version: Version, Image: "oci:/img", Entrypoint: []string{}},
	} {
		t.Run(name, func(t *testing.T) {
			if err := s.Validate(); err != nil {
				t.Fatal(err)
			}
			b, err := s.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			got, err := Parse(b)
			if err != nil {
				t.Fatalf("Parse(%s): %v", b, err)
			}
			if !reflect.DeepEqual(got, s) {
				t.Fatalf("round trip of %s:\n got %#v\nwant %#v", b, got, s)
			}
			// Stable: the same spec makes the same bytes.
			if b2, _ := got.Marshal(); !bytes.Equal(b, b2) {
				t.Fatalf("re-encoded differently:\n%s\n%s", b, b2)
			}
		})
	}
	// nil and [] entrypoints are told apart on the wire.
	b, _ := New("oci:/img").Marshal()
	if strings.Contains(string(b), "entrypoint") {
		t.Errorf("a nil entrypoint is written: %s", b)
	}
	b, _ = (&Spec{Version: Version, Image: "oci:/img", Entrypoint: []string{}}).Marshal()
	if !strings.Contains(string(b), `"entrypoint":[]`) {
		t.Errorf("a cleared entrypoint is not written as []: %s", b)
	}
}

// TestDocExample: the JSON example of the package doc parses.
func TestDocExample(t *testing.T) {
	doc := docComment(t)
	i := strings.Index(doc, "\t{\n")
	j := strings.Index(doc[i:], "\n\t}\n")
	if i < 0 || j < 0 {
		t.Fatal("no JSON example in doc.go")
	}
	s, err := Parse([]byte(doc[i : i+j+3]))
	if err != nil {
		t.Fatal(err)
	}
	if s.Image != "docker:dind" || s.Limits.CPUs != 2 || len(s.Mounts) != 2 || s.Mounts[0].Size != 32<<30 {
		t.Errorf("parsed %+v", s)
	}
}

func TestParseRefuses(t *testing.T) {
	ok := `"version":1,"image":"oci:/img"`
	for _, c := range []struct {
		in, says string
	}{
		{`{"image":"oci:/img"}`, `version: missing`},
		{`{"version":2,"image":"oci:/img"}`, `version: 2 is not supported`},
		{`{"version":"1","image":"oci:/img"}`, `version: want a int`},
		{`{` + ok + `,"imagee":"x"}`, `unknown field "imagee"`},
		{`{` + ok + `,"limits":{"memory":1}}`, `unknown field "memory"`},
		{`{` + ok + `,"mounts":[{"type":"tmpfs","target":"/t","src":"/x"}]}`, `unknown field "src" in mounts[0]`},
		{`{"version":1,"Image":"oci:/img"}`, `unknown field "Image"`},
		{`{` + ok + `,"limits":{"CPUs":1}}`, `unknown field "CPUs" in limits`},
		{`{` + ok + `,"limits":{"memory_bytes":"4g"}}`, `limits.memory_bytes: want a int64, not a JSON string`},
		{`{` + ok + `} {}`, `data after`},
		{`{` + ok + `}x`, `data after`},
		{`[]`, `a spec is a JSON object`},
		{``, `empty or truncated`},
		{`{` + ok, `empty or truncated`},
		{`{"version":1,}`, `not JSON at byte`},
		{`{"version":1,"image":""}`, `image: is empty`},
		{`{` + ok + `,"network":"host"}`, `network: "host": want none or nat`},
		{`{` + ok + `,"mounts":[{"type":"volume","source":"rel.ext4","target":"/d"}]}`, `mounts[0].source: "rel.ext4" is not an absolute host path`},
		{`{` + ok + `,"lockdown":"partial"}`, `lockdown: "partial": want full or off`},
		{`{"version":1,"image":"oci:/img","pad":"` + strings.Repeat("x", MaxSize) + `"}`, `more than the`},
	} {
		_, err := Parse([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.says) || !errors.Is(err, ErrInvalid) {
			in := c.in
			if len(in) > 100 {
				in = in[:100] + "…"
			}
			t.Errorf("Parse(%s) = %v; want an ErrInvalid saying %q", in, err, c.says)
		}
	}
}

func TestDecodeBounded(t *testing.T) {
	// An endless stream is refused after MaxSize+1 bytes, not read to its end.
	_, err := Decode(endless{})
	if err == nil || !strings.Contains(err.Error(), "more than the") {
		t.Fatalf("Decode(endless) = %v", err)
	}
}

type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

func FuzzParse(f *testing.F) {
	b, _ := full().Marshal()
	f.Add(b)
	f.Add([]byte(`{"version":1,"image":"x","mounts":[{"type":"volume"}]}`))
	f.Add([]byte(`{"version":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not unwrap to ErrInvalid", err)
			}
			return
		}
		// What Parse accepts round-trips.
		b, err := s.Marshal()
		if err != nil {
			t.Fatalf("accepted spec does not marshal: %v", err)
		}
		s2, err := Parse(b)
		if err != nil {
			t.Fatalf("round trip: %v", err)
		}
		if b2, _ := s2.Marshal(); !bytes.Equal(b, b2) {
			t.Fatalf("round trip:\n%s\n%s", b, b2)
		}
		var anyJSON any
		if json.Unmarshal(b, &anyJSON) != nil {
			t.Fatal("Marshal wrote invalid JSON")
		}
	})
}
