package dind

import (
	"reflect"
	"testing"
)

func TestArgs(t *testing.T) {
	off := []string{"--iptables=false", "--ip6tables=false"}
	for _, tc := range []struct {
		args, want []string
	}{
		{[]string{"dockerd-entrypoint.sh"}, append([]string{"dockerd-entrypoint.sh"}, off...)},
		{[]string{"/usr/local/bin/dockerd-entrypoint.sh", "--tls=false"}, append([]string{"/usr/local/bin/dockerd-entrypoint.sh", "--tls=false"}, off...)},
		{[]string{"dockerd", "--iptables=true"}, []string{"dockerd", "--iptables=true", "--ip6tables=false"}},
		{[]string{"dockerd-entrypoint.sh", "--iptables", "--ip6tables=true"}, []string{"dockerd-entrypoint.sh", "--iptables", "--ip6tables=true"}},
		{[]string{"dockerd-entrypoint.sh", "sh", "-c", "x"}, []string{"dockerd-entrypoint.sh", "sh", "-c", "x"}},
		{[]string{"sh", "-c", "dockerd"}, []string{"sh", "-c", "dockerd"}},
		{[]string{"dockerd", "-H", "fd://"}, []string{"dockerd", "-H", "fd://"}}, // fd:// could be a program
		{[]string{"/usr/bin/dockerd-rootless.sh"}, []string{"/usr/bin/dockerd-rootless.sh"}},
		{nil, nil},
	} {
		in := append([]string(nil), tc.args...)
		if got := Args(tc.args); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Args(%q) = %q, want %q", tc.args, got, tc.want)
		}
		if !reflect.DeepEqual(in, tc.args) {
			t.Errorf("Args modified its argument: %q", tc.args)
		}
	}
}

func TestAddFlags(t *testing.T) {
	in := []string{"-H", "fd://", "--ip6tables=true"}
	if got, want := AddFlags(in), []string{"-H", "fd://", "--ip6tables=true", "--iptables=false"}; !reflect.DeepEqual(got, want) {
		t.Errorf("AddFlags(%q) = %q, want %q", in, got, want)
	}
	if got := AddFlags(nil); !reflect.DeepEqual(got, Flags) {
		t.Errorf("AddFlags(nil) = %q", got)
	}
}
