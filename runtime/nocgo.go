//go:build !cgo

package runtime

const builtWithCgo = false
