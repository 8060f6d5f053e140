// Package volcore holds gvx-vol's read-only volume verbs that the gvx-vol
// binary answers itself, info and ls, without a CLI framework: each verb's
// flags (declared once for both parsers, as fastflag.Flag) and its run (a
// fastflag.RunFunc), which calls ext4lite and prints; and OpenVolume, which
// every volume verb opens FILE with. Package volcmd, in gvx-vol-tools, holds
// their help text and runs the same functions from urfave/cli.
//
// The package must not import urfave/cli or anything whose initialisation
// is heavy: the gvx-vol binary links it, and every clone pays for what that
// binary links (docs/gvx-vol.md, "Start-up").
package volcore
