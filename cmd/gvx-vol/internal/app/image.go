package app

import "z.gfire.dev/gvx/cmd/gvx-vol/internal/imagecmd"

func init() { register(imagecmd.Commands) }
