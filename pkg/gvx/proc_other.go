//go:build !linux

package gvx

import "os/exec"

// dieWithCaller has no portable equivalent here.
func dieWithCaller(cmd *exec.Cmd) (unpin func()) { return func() {} }
