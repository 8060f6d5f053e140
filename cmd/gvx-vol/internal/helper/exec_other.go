//go:build !unix

package helper

import (
	"errors"
	"os"
	"os/exec"
)

// execve runs path as a child with this process's standard streams and
// exits with its status: there is no exec(2) to replace the process.
func execve(path string, args []string) error {
	cmd := exec.Command(path, args[1:]...)
	cmd.Args[0] = args[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		os.Exit(ee.ExitCode())
	}
	if err != nil {
		return err
	}
	os.Exit(0)
	return nil
}
