package app

import "z.gfire.dev/gvx/cmd/gvx-vol/internal/clonecmd"

func init() { register(clonecmd.Commands) }
