package runtime

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/sinktest"
	"z.gfire.dev/gvx/spec"
)

func TestProcessArgs(t *testing.T) {
	img := &Image{Config: v1.Config{Entrypoint: []string{"/entry"}, Cmd: []string{"default"}}}
	noEntry := &Image{Config: v1.Config{Cmd: []string{"sh"}}}
	for _, tc := range []struct {
		name string
		o    spec.Spec
		img  *Image
		want []string
		err  error
	}{
		{"image entrypoint and cmd", spec.Spec{}, img, []string{"/entry", "default"}, nil},
		{"args replace cmd", spec.Spec{Args: []string{"a"}}, img, []string{"/entry", "a"}, nil},
		{"entrypoint drops cmd", spec.Spec{Entrypoint: []string{"/x"}}, img, []string{"/x"}, nil},
		{"entrypoint with args", spec.Spec{Entrypoint: []string{"/x"}, Args: []string{"b"}}, img, []string{"/x", "b"}, nil},
		{"empty entrypoint uses args", spec.Spec{Entrypoint: []string{}, Args: []string{"echo"}}, img, []string{"echo"}, nil},
		{"cmd only", spec.Spec{}, noEntry, []string{"sh"}, nil},
		{"nothing", spec.Spec{Entrypoint: []string{}}, img, nil, ErrNoCommand},
	} {
		got, err := processArgs(&tc.o, tc.img)
		if !errors.Is(err, tc.err) || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %q, %v; want %q, %v", tc.name, got, err, tc.want, tc.err)
		}
	}
}

func TestDindArgs(t *testing.T) {
	off := []string{"--iptables=false", "--ip6tables=false"}
	for _, tc := range []struct {
		args       []string
		privileged bool
		want       []string
	}{
		{[]string{"dockerd-entrypoint.sh"}, true, append([]string{"dockerd-entrypoint.sh"}, off...)},
		{[]string{"/usr/local/bin/dockerd-entrypoint.sh", "--tls=false"}, true, append([]string{"/usr/local/bin/dockerd-entrypoint.sh", "--tls=false"}, off...)},
		{[]string{"dockerd", "--iptables=true"}, true, []string{"dockerd", "--iptables=true", "--ip6tables=false"}},
		{[]string{"dockerd-entrypoint.sh", "--iptables", "--ip6tables=true"}, true, []string{"dockerd-entrypoint.sh", "--iptables", "--ip6tables=true"}},
		{[]string{"dockerd-entrypoint.sh", "sh", "-c", "x"}, true, []string{"dockerd-entrypoint.sh", "sh", "-c", "x"}},
		{[]string{"dockerd-entrypoint.sh"}, false, []string{"dockerd-entrypoint.sh"}},
		{[]string{"sh", "-c", "dockerd"}, true, []string{"sh", "-c", "dockerd"}},
	} {
		// DOCKER_TLS_CERTDIR=/certs: no --tls=false (TestDindTLSDefault).
		if got := dindArgs(tc.args, tc.privileged, []string{"DOCKER_TLS_CERTDIR=/certs"}, nil); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("dindArgs(%q, %v) = %q, want %q", tc.args, tc.privileged, got, tc.want)
		}
	}
}

func TestMergeEnv(t *testing.T) {
	got := mergeEnv([]string{"PATH=/bin", "A=image", "B=image"}, []string{"B=cli", "C=cli"}, "host", "/home/u")
	want := []string{"PATH=/bin", "HOSTNAME=host", "A=image", "B=cli", "C=cli", "HOME=/home/u"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q want %q", got, want)
	}
	got = mergeEnv(nil, []string{"HOME=/x"}, "h", "/root")
	if got[0] != defaultPath || got[len(got)-1] != "HOME=/x" {
		t.Fatalf("defaults: %q", got)
	}
}

func etc(t testing.TB, passwd, group string) sink.Source {
	m := sinktest.NewMemFS()
	if err := m.Mkdir(&sink.Header{Path: "etc", Mode: sink.TypeDir | 0o755}); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"etc/passwd": passwd, "etc/group": group} {
		if err := m.WriteFile(&sink.Header{Path: name, Mode: sink.TypeReg | 0o644, Size: int64(len(body))}, strings.NewReader(body)); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func TestResolveUser(t *testing.T) {
	src := etc(t, "root:x:0:0::/root:/bin/sh\nbob:x:1001:1002::/home/bob:/bin/sh\n", "root:x:0:\nwheel:x:10:bob,eve\nbob:x:1002:\ndocker:x:999:bob\n")
	for _, tc := range []struct {
		spec string
		want guestUser
		bad  bool
	}{
		{"", guestUser{UID: 0, GID: 0, Groups: []uint32{0}, Home: "/root"}, false},
		{"bob", guestUser{UID: 1001, GID: 1002, Groups: []uint32{10, 999}, Home: "/home/bob"}, false},
		{"1001", guestUser{UID: 1001, GID: 1002, Groups: []uint32{10, 999}, Home: "/home/bob"}, false},
		{"bob:wheel", guestUser{UID: 1001, GID: 10, Groups: []uint32{10}, Home: "/home/bob"}, false},
		{"4242:7", guestUser{UID: 4242, GID: 7, Groups: []uint32{7}}, false},
		{"nobody", guestUser{}, true},
		{"bob:nogroup", guestUser{}, true},
	} {
		got, err := resolveUser(src, tc.spec)
		if (err != nil) != tc.bad || !tc.bad && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: got %+v, %v; want %+v (error %v)", tc.spec, got, err, tc.want, tc.bad)
		}
	}
	// No /etc at all: numbers still work.
	if u, err := resolveUser(sinktest.NewMemFS(), "5:6"); err != nil || u.UID != 5 || u.GID != 6 {
		t.Fatalf("without /etc: %+v %v", u, err)
	}
}

func TestCreateMissingVolume(t *testing.T) {
	dir := t.TempDir()
	m := Mount{Type: MountVolume, Source: filepath.Join(dir, "new.ext4"), Target: "/d", Size: 64 << 20}
	if created, err := CreateMissingVolume(m); err != nil || !created {
		t.Fatalf("first call: %v, %v", created, err)
	}
	v, err := ext4lite.Open(m.Source, &ext4lite.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if in, err := v.Info(); err != nil || uint64(in.BlockSize)*in.Blocks != 64<<20 {
		t.Errorf("info %+v, %v; want a 64 MiB volume", in, err)
	}
	v.Close()
	if created, err := CreateMissingVolume(m); err != nil || created {
		t.Fatalf("second call must keep the file: %v, %v", created, err)
	}
	m.Source = filepath.Join(dir, "missing", "v.ext4")
	if _, err := CreateMissingVolume(m); err == nil {
		t.Fatal("a volume in a missing directory was created")
	}
	if created, err := CreateMissingVolume(Mount{Type: MountBind, Source: filepath.Join(dir, "nope"), Target: "/b"}); created || err != nil {
		t.Fatalf("bind mount: %v, %v", created, err)
	}
}

// TestSandboxSocketFlags: a Docker daemon's episode gets raw sockets and
// packet-socket writes (its embedded DNS and Docker 28's address
// announcements need them), any other episode only what it asked for.
func TestSandboxSocketFlags(t *testing.T) {
	dind := &Image{Config: v1.Config{Entrypoint: []string{"dockerd-entrypoint.sh"}}}
	shell := &Image{Config: v1.Config{Cmd: []string{"sh"}}}
	both := []string{"--net-raw", "--allow-packet-socket-write"}
	for _, tc := range []struct {
		name string
		o    spec.Spec
		img  *Image
		want []string
	}{
		{"dind privileged", spec.Spec{Privileged: true}, dind, both},
		{"dind with flags", spec.Spec{Privileged: true, Args: []string{"--tls=false"}}, dind, both},
		{"dind unprivileged", spec.Spec{}, dind, nil},
		{"dind entrypoint running a shell", spec.Spec{Privileged: true, Args: []string{"sh", "-c", "dockerd"}}, dind, both},
		{"shell privileged", spec.Spec{Privileged: true}, shell, nil},
		{"asked for raw", spec.Spec{NetRaw: true}, shell, both[:1]},
		{"asked for packet writes", spec.Spec{AllowPacketSocketWrite: true}, shell, both[1:]},
		{"no command", spec.Spec{Privileged: true, Entrypoint: []string{}}, dind, nil},
	} {
		if got := sandboxSocketFlags(&tc.o, tc.img).flags(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
