package app

import "z.gfire.dev/gvx/cmd/gvx-vol/internal/erofscmd"

func init() { register(erofscmd.Commands) }
