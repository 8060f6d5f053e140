package app

import "z.gfire.dev/gvx/cmd/gvx-vol/internal/goldencmd"

func init() { register(goldencmd.Commands) }
