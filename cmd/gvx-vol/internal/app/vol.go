package app

import "z.gfire.dev/gvx/cmd/gvx-vol/internal/volcmd"

func init() { register(volcmd.Commands) }
