//go:build cgo

package runtime

// builtWithCgo: gVisor's sandbox cannot start from a cgo build (it
// re-executes itself to drop capabilities and fails to find
// /proc/self/exe inside its chroot), so Main refuses to run.
const builtWithCgo = true
