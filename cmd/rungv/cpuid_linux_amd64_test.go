package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestGuestCPUIDNative: a guest's cpuid instructions run natively
// (gVisor patch 0016-systrap-native-cpuid, runsc's
// --systrap-disable-cpuid-faulting), so the guest sees exactly what the
// host sees, including the leaves gVisor's emulation answers with zeros
// (testdata/cpuidprobe: 6, 0xa, 0x16, 0x40000000), in both isolation
// modes, as root and as nobody. With CPUID faulting on, every cpuid was a trap to the Sentry
// (about 68 per start of a glibc program) and those leaves read zero.
func TestGuestCPUIDNative(t *testing.T) {
	needPatch(t, "0016-systrap-native-cpuid")
	probe := guestProgram(t, "cpuidprobe")
	host, err := exec.Command(probe).Output()
	if err != nil {
		t.Fatalf("cpuidprobe on the host: %v", err)
	}
	// The comparison shows emulation only if the host answers some leaf
	// the Sentry zeroes with something else.
	telling := false
	for _, l := range strings.Split(strings.TrimSpace(string(host)), "\n") {
		f := strings.Fields(l)
		switch f[0] {
		case "0x6.0", "0xa.0", "0x16.0", "0x40000000.0":
			if strings.Join(f[1:], "") != strings.Repeat("0", 32) {
				telling = true
			}
		}
	}
	if !telling {
		t.Skipf("this host's cpuid answers zeros for every leaf gVisor's emulation zeroes, so emulated and native cannot be told apart:\n%s", host)
	}
	bin := guestProgramBytes(t, "cpuidprobe")
	both(t, func(t *testing.T, u user) {
		isolations(t, u, func(t *testing.T, iso string) {
			tmp := privateTmp(t, u)
			r := runRungv(t, u, tmp, string(bin), "run", "--rm", "--network", "none", "--isolation", iso, imageRef,
				"sh", "-c", "cat > /tmp/cpuidprobe && chmod +x /tmp/cpuidprobe && /tmp/cpuidprobe")
			if r.code != 0 {
				t.Fatalf("cpuidprobe in the episode: exit %d: %s%s", r.code, r.stdout, r.stderr)
			}
			if r.stdout != string(host) {
				t.Fatalf("the guest's cpuid differs from the host's (emulated by the Sentry?):\nguest:\n%shost:\n%s", r.stdout, host)
			}
		})
	})
}
