//go:build unix

package helper

import (
	"os"
	"syscall"
)

// execve replaces the process with path.
func execve(path string, args []string) error {
	return syscall.Exec(path, args, os.Environ())
}
