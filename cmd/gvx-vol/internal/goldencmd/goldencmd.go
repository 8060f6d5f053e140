// Package goldencmd is gvx-vol's build-golden verb: the one-time step of the
// seeds' workflow that makes golden-docker.ext4, a /var/lib/docker volume
// with base images already loaded, which every episode then clones. It is a
// thin CLI over golden.Build: flags in, one call, the summary out.
//
// gvx-vol never imports gVisor (it must start in milliseconds): the daemon
// runs in the rungv binary, through package gvx (the SDK), found with
// --rungv, $GVX_RUNGV or PATH.
package goldencmd

import "github.com/urfave/cli/v2"

// Command returns the build-golden verb, a new one at each call
// (urfave/cli's setup changes a command in place).
func Command() *cli.Command { return buildCommand() }
