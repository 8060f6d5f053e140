package runtime

import (
	"encoding/json"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Docker inside: what a Docker daemon needs from an episode, found by
// running the Debian docker.io image of package image/dindtest in the
// Sentry (docs/dind.md has the errors seen without each item). Nothing
// here is wired into Run yet: the runtime calls ApplyDind on the spec and
// adds DindRunscFlags when an episode asks for it (docker's --privileged).

// DindCapabilities is every capability, as docker run --privileged gives:
// dockerd mounts overlays (CAP_SYS_ADMIN), makes bridges and veths
// (CAP_NET_ADMIN), and runc needs the rest for its containers.
var DindCapabilities = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
	"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
	"CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW",
	"CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT",
	"CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
	"CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
	"CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE",
	"CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ",
	"CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
}

// DindDockerdFlags are the dockerd flags the Sentry needs: its netstack
// has no MASQUERADE target, so dockerd must not program iptables (the
// default bridge still works, without NAT to the outside).
var DindDockerdFlags = []string{"--iptables=false", "--ip6tables=false"}

// DindExtraFlagsEnv is read by the dind image's dockerd-entrypoint.sh
// (image/dindtest) and appended to dockerd's flags, so an episode can add
// DindDockerdFlags without changing the command a seed gives.
const DindExtraFlagsEnv = "DOCKERD_EXTRA_FLAGS"

// DindCgroupPath is where dockerd looks for cgroups ("Devices cgroup isn't
// mounted" without it). The Sentry serves its own cgroupfs: this is no
// host cgroup.
const DindCgroupPath = "/sys/fs/cgroup"

// DindRunscFlags are the runsc flags of a dind episode:
//   - --net-raw: raw sockets for the containers (ping), as under Docker;
//     the daemon itself starts and runs containers without it;
//   - --host-uds=create: a socket dockerd creates in a bind-mounted host
//     directory is reachable from the host (gVisor's port forwarding loses
//     data on bulk transfers: RUNTIME-NOTES.md);
//   - --file-access-mounts=exclusive: mounts without a hint are the
//     sandbox's alone, so the Sentry caches their pages and lets them be
//     memory-mapped. containerd's and dockerd's bolt databases mmap their
//     files; on a share=shared mount without host FDs (what an ext4lite
//     volume is) mmap fails with ENODEV and dockerd cannot start. Dirty
//     pages reach the volume server on fsync, on eviction and when the
//     sandbox tears its mounts down (a graceful stop): a SIGKILLed episode
//     loses what was still cached.
//   - --directfs=false: what the volume hints did per mount (the ext4lite
//     server hands out no host FDs); bind mounts then go through lisafs.
//
// ApplyDind removes the volume hints that would override the exclusive
// mode.
func DindRunscFlags() []string {
	return []string{"--net-raw", "--host-uds=create", "--file-access-mounts=exclusive", "--directfs=false"}
}

// volumeAnnotationPrefix is package volume's AnnotationPrefix (that
// package builds on Linux only).
const volumeAnnotationPrefix = "dev.gvx.volume."

// mountHintPrefix starts gVisor's per-mount hint annotations:
// dev.gvisor.spec.mount.<name>.<field>.
const mountHintPrefix = "dev.gvisor.spec.mount."

// dropVolumeHints removes the mount hints of every ext4lite volume in s: a
// hint makes the mount share=shared (no mmap without host FDs), and
// share=container puts a memory overlay on it (writes never reach the
// volume), so a volume that dockerd uses must have none.
func dropVolumeHints(s *specs.Spec) {
	vols := map[string]bool{}
	for k, v := range s.Annotations {
		if !strings.HasPrefix(k, volumeAnnotationPrefix) {
			continue
		}
		var vs struct {
			Source string `json:"src"`
		}
		if json.Unmarshal([]byte(v), &vs) == nil && vs.Source != "" {
			vols[vs.Source] = true
		}
	}
	names := map[string]bool{}
	for k, v := range s.Annotations {
		if name, ok := strings.CutPrefix(k, mountHintPrefix); ok && strings.HasSuffix(name, ".source") && vols[v] {
			names[strings.TrimSuffix(name, ".source")] = true
		}
	}
	for k := range s.Annotations {
		rest, ok := strings.CutPrefix(k, mountHintPrefix)
		if !ok {
			continue
		}
		if name, _, ok := strings.Cut(rest, "."); ok && names[name] {
			delete(s.Annotations, k)
		}
	}
}

// ApplyDind makes s fit for a Docker daemon: every capability in every
// set, a cgroup mount at DindCgroupPath (unless s mounts something there),
// DindDockerdFlags in DindExtraFlagsEnv (unless s sets it), and no mount
// hints on ext4lite volumes (see DindRunscFlags). Seccomp stays off (the
// Sentry does not apply the spec's filter unless asked).
func ApplyDind(s *specs.Spec) {
	dropVolumeHints(s)
	if s.Process != nil {
		caps := append([]string(nil), DindCapabilities...)
		s.Process.Capabilities = &specs.LinuxCapabilities{
			Bounding: caps, Effective: caps, Permitted: caps, Inheritable: caps, Ambient: caps,
		}
		hasEnv := false
		for _, kv := range s.Process.Env {
			if len(kv) > len(DindExtraFlagsEnv) && kv[:len(DindExtraFlagsEnv)+1] == DindExtraFlagsEnv+"=" {
				hasEnv = true
			}
		}
		if !hasEnv {
			flags := DindExtraFlagsEnv + "="
			for i, f := range DindDockerdFlags {
				if i > 0 {
					flags += " "
				}
				flags += f
			}
			s.Process.Env = append(s.Process.Env, flags)
		}
	}
	for _, m := range s.Mounts {
		if m.Destination == DindCgroupPath {
			return
		}
	}
	s.Mounts = append(s.Mounts, specs.Mount{
		Destination: DindCgroupPath, Type: "cgroup", Source: "cgroup",
		Options: []string{"nosuid", "noexec", "nodev", "rw"},
	})
}
