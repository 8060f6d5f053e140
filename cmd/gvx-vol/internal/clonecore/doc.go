// Package clonecore is gvx-vol's clone verb without a CLI framework: its
// flags (declared once, in Flags, for both parsers), its parse (Parse,
// through package fastflag) and the verb itself (Run), which calls package
// reflink and prints.
//
// Two callers share it. The gvx-vol binary runs `gvx-vol clone ...`
// through Parse and Run directly, so an episode's reset by command does
// not pay for urfave/cli or any other verb's packages (their package
// initialisation was most of a clone's time; docs/gvx-vol.md, "Start-up").
// The full CLI (package clonecmd, in gvx-vol-tools) declares the same Flags
// as urfave/cli flags and calls Run from its action, so help, completion
// and every usage error urfave/cli reports stay its own. Parse reports
// false for every command line urfave/cli might parse differently; the
// gvx-vol binary then hands it to gvx-vol-tools.
//
// The package must not import urfave/cli or anything whose initialisation
// is heavy; cmd/gvx-vol's TestFastPathLinksLittle checks the binary's
// dependencies.
package clonecore
