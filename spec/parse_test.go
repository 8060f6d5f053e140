package spec

import (
	"errors"
	"testing"
)

func TestParseMount(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Mount
		bad  bool
	}{
		{"type=volume,src=/v.ext4,dst=/var/lib/docker", Mount{Type: MountVolume, Source: "/v.ext4", Target: "/var/lib/docker"}, false},
		{"src=/v.ext4,dst=/d,readonly", Mount{Type: MountVolume, Source: "/v.ext4", Target: "/d", ReadOnly: true}, false},
		{"type=bind,source=/h,target=/g,ro=true", Mount{Type: MountBind, Source: "/h", Target: "/g", ReadOnly: true}, false},
		{"type=bind,source=/h,target=/g,ro=false", Mount{Type: MountBind, Source: "/h", Target: "/g"}, false},
		{"type=tmpfs,dst=/t", Mount{Type: MountTmpfs, Target: "/t"}, false},
		{"type=volume,src=/v.ext4,dst=/d,size=8g", Mount{Type: MountVolume, Source: "/v.ext4", Target: "/d", Size: 8 << 30}, false},
		{"type=volume,src=/v.ext4,dst=/d,size=512MiB", Mount{Type: MountVolume, Source: "/v.ext4", Target: "/d", Size: 512 << 20}, false},
		{"src=/v.ext4,dst=/d,max-open=10,allow-foreign", Mount{Type: MountVolume, Source: "/v.ext4", Target: "/d", MaxOpen: 10, AllowForeignOwner: true}, false},
		// CSV, as docker's --mount: a quoted field may hold commas (and "=" is
		// split at the first one only).
		{`type=volume,"src=/srv/a,b=c/v.ext4",dst=/d`, Mount{Type: MountVolume, Source: "/srv/a,b=c/v.ext4", Target: "/d"}, false},
		{`"src=/x,y","dst=/in,out"`, Mount{Type: MountVolume, Source: "/x,y", Target: "/in,out"}, false},
		{"src=/a=b,dst=/c", Mount{Type: MountVolume, Source: "/a=b", Target: "/c"}, false},
		{"", Mount{}, true},
		{`src="/a,dst=/b`, Mount{}, true},
		{"src=/a,dst=/b\nsrc=/c,dst=/d", Mount{}, true},
		{"type=tmpfs,src=/x,dst=/t", Mount{}, true},
		{"type=volume,dst=/t", Mount{}, true},
		{"type=nfs,src=a,dst=/t", Mount{}, true},
		{"type=bind,src=/a,dst=rel", Mount{}, true},
		{"type=bind,src=/a,dst=/b,bogus=1", Mount{}, true},
		{"type=bind,src=/a,dst=/b,readonly=maybe", Mount{}, true},
		{"type=volume,src=/v.ext4,dst=/d,size=lots", Mount{}, true},
		{"type=volume,src=/v.ext4,dst=/d,size=0", Mount{}, true},
		{"type=volume,src=/v.ext4,dst=/d,size=2P", Mount{}, true},
		{"type=volume,src=/v.ext4,dst=/d,max-open=-1", Mount{}, true},
		{"type=bind,src=/a,dst=/b,size=1g", Mount{}, true},
		{"type=tmpfs,dst=/b,allow-foreign", Mount{}, true},
		{"src=/v.ext4,dst=/d,durability=episode", Mount{Type: MountVolume, Source: "/v.ext4", Target: "/d", Durability: DurabilityEpisode}, false},
		{"src=/v.ext4,dst=/d,durability=full", Mount{Type: MountVolume, Source: "/v.ext4", Target: "/d", Durability: DurabilityFull}, false},
		{"src=/v.ext4,dst=/d,durability=none", Mount{}, true},
		{"src=/v.ext4,dst=/d,durability=Episode", Mount{}, true},
		{"src=/v.ext4,dst=/d,ro,durability=episode", Mount{}, true},
		{"type=bind,src=/a,dst=/b,durability=episode", Mount{}, true},
		{"type=tmpfs,dst=/b,durability=full", Mount{}, true},
	} {
		got, err := ParseMount(tc.in)
		if (err != nil) != tc.bad || !tc.bad && got != tc.want {
			t.Errorf("%q: got %+v, %v", tc.in, got, err)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: error %v does not wrap ErrInvalid", tc.in, err)
		}
	}
}

func TestParsePublish(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Port
		bad  bool
	}{
		{"unix:/run/d.sock:2375", Port{HostSocket: "/run/d.sock", GuestPort: 2375}, false},
		{"unix:rel:with:colons.sock:80", Port{HostSocket: "rel:with:colons.sock", GuestPort: 80}, false},
		{"8080:80", Port{HostAddr: "127.0.0.1:8080", GuestPort: 80}, false},
		{"0.0.0.0:8080:80", Port{HostAddr: "0.0.0.0:8080", GuestPort: 80}, false},
		{"[::1]:8080:80", Port{HostAddr: "[::1]:8080", GuestPort: 80}, false},
		{"0:80", Port{HostAddr: "127.0.0.1:0", GuestPort: 80}, false},
		{"unix::80", Port{}, true},
		{"80", Port{}, true},
		{"8080:0", Port{}, true},
		{"8080:70000", Port{}, true},
		{"99999:80", Port{}, true},
		{"host.example:8080:80", Port{}, true},
		{"x:80", Port{}, true},
	} {
		got, err := ParsePublish(tc.in)
		if (err != nil) != tc.bad || !tc.bad && got != tc.want {
			t.Errorf("%q: got %+v, %v", tc.in, got, err)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: error %v does not wrap ErrInvalid", tc.in, err)
		}
		if err == nil && got.HostAddr != "" {
			// What ParsePublish makes, Validate accepts.
			s := New("oci:/img")
			s.Ports = []Port{got}
			if err := s.Validate(); err != nil {
				t.Errorf("%q: %v", tc.in, err)
			}
		}
	}
}
