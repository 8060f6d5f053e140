package gvx

import (
	"fmt"
	"os"
	"path/filepath"
)

// isSocketName reports whether name is what PoolConfig.Sockets accepts as
// a name, 1-16 of [a-z0-9_-]: it becomes part of a file name. (Not a
// package-level regexp: every start of a binary linking this package,
// gvx-vol's clone included, would compile it.)
func isSocketName(name string) bool {
	if len(name) < 1 || len(name) > 16 {
		return false
	}
	for i := range len(name) {
		if c := name[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// maxSocketPath is the longest unix socket path Linux takes (sun_path is
// 108 bytes with its NUL).
const maxSocketPath = 107

// checkSockets validates PoolConfig.Sockets for scratch.
func checkSockets(socks map[string]int, scratch string) error {
	for name, port := range socks {
		if !isSocketName(name) {
			return fmt.Errorf("gvx: PoolConfig.Sockets name %q: want 1-16 of [a-z0-9_-]", name)
		}
		if port < 1 || port > 65535 {
			return fmt.Errorf("gvx: PoolConfig.Sockets[%q] = %d is not a TCP port", name, port)
		}
		if p := socketPath(scratch, 1<<20, name); len(p) > maxSocketPath {
			return fmt.Errorf("gvx: socket paths under ScratchDir %s would be %d bytes, over the %d a unix socket takes: use a shorter ScratchDir", scratch, len(p), maxSocketPath)
		}
	}
	return nil
}

// socketPath is episode seq's socket name: ep-<pid>-<seq>.<name>.sock
// beside its clone, so the sweep of a dead pool's clones finds it too.
func socketPath(scratch string, seq int, name string) string {
	return filepath.Join(scratch, fmt.Sprintf("ep-%d-%04d.%s.sock", os.Getpid(), seq, name))
}

// sockets returns episode seq's socket paths by name (nil without
// PoolConfig.Sockets).
func (p *Pool) sockets(seq int) map[string]string {
	if len(p.cfg.Sockets) == 0 {
		return nil
	}
	m := make(map[string]string, len(p.cfg.Sockets))
	for name := range p.cfg.Sockets {
		m[name] = socketPath(p.scratch, seq, name)
	}
	return m
}

// checkpointSockets checks that socks names every port cp publishes, by
// guest port, and nothing else (PoolConfig.Checkpoint).
func checkpointSockets(cp *Checkpoint, socks map[string]int) error {
	want := map[int]bool{}
	for _, pt := range cp.Spec.Ports {
		want[pt.GuestPort] = true
	}
	have := map[int]bool{}
	for name, port := range socks {
		if !want[port] {
			return fmt.Errorf("gvx: PoolConfig.Sockets[%q] = %d: the checkpoint %s does not publish guest port %d (a restore keeps the checkpoint's ports)", name, port, cp.Dir, port)
		}
		if have[port] {
			return fmt.Errorf("gvx: PoolConfig.Sockets names guest port %d twice", port)
		}
		have[port] = true
	}
	for port := range want {
		if !have[port] {
			return fmt.Errorf("gvx: the checkpoint %s publishes guest port %d: name it in PoolConfig.Sockets (each restored episode needs its own socket for it)", cp.Dir, port)
		}
	}
	return nil
}

// restorePorts are an episode's sockets (by name) as Checkpoint.Restore
// takes them: one per published port of cp, in its order.
func restorePorts(cp *Checkpoint, socks map[string]int, paths map[string]string) []Port {
	byPort := map[int]string{}
	for name, port := range socks {
		byPort[port] = paths[name]
	}
	ports := make([]Port, len(cp.Spec.Ports))
	for i, pt := range cp.Spec.Ports {
		ports[i] = Port{HostSocket: byPort[pt.GuestPort], GuestPort: pt.GuestPort}
	}
	return ports
}
