// Package cgroup makes, joins and removes the host cgroup of one episode,
// where the caller may make one: as root, or in a delegated cgroup v2
// subtree (v1 hierarchies as root too). The Sentry shapes what the guest
// sees in any case; a cgroup also caps what the whole episode (Sentry,
// gofer, helpers) takes from the host: memory, CPU time, tasks.
//
// Contract: New makes a child gvx-<id> of the caller's own cgroup with the
// limits asked for, or returns nil (no error) where none can be made;
// record is called with its directories before they exist, so that a
// later start can remove what a killed one left (runtime's sweepStale,
// with Mounts to check where a recorded directory may be). Has, Dirs,
// Remove and RemoveWhenEmpty accept a nil Episode (no cgroup). Leave is the supervisor's
// last act: it moves itself out and removes the directories once the
// kernel has let go of the episode's tasks.
//
// Trust boundary: only rungv's own processes call it, with its own values;
// the paths it writes are under the cgroup mounts of /proc/self/mountinfo
// and the caller's own cgroup of /proc/self/cgroup. A guest never reaches
// it: the Sentry's cgroupfs (docker run --privileged's /sys/fs/cgroup) is
// the Sentry's own, not the host's.
package cgroup
