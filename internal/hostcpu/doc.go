// Package hostcpu lists and sets the host CPUs this process may run on
// (its scheduler affinity): what rungv run --host-cpus and rungv serve
// --pin-cpus use, and what their tests read back. Linux only; elsewhere
// Allowed says it is not supported.
package hostcpu
