// Package clonecore is gvx-vol's clone verb without a CLI framework: its
// flags (declared once, in Flags), a parser for them built on package flag
// (Parse), and the verb itself (Run), which calls package reflink and
// prints.
//
// Two callers share it. The gvx-vol binary runs `gvx-vol clone ...`
// through Parse and Run directly, so an episode's reset by command does
// not pay for urfave/cli or any other verb's packages (their package
// initialisation was most of a clone's time; docs/gvx-vol.md, "Start-up").
// The full CLI (package clonecmd, in gvx-vol-tools) declares the same Flags
// as urfave/cli flags and calls Run from its action, so help, completion
// and every usage error urfave/cli reports stay its own.
//
// Parse accepts exactly the command lines urfave/cli would parse the same
// way and reports false for every other one (help, completion, a flag
// error, two spellings of one flag, a flag-like argument after SRC): the
// caller then hands the whole command line to gvx-vol-tools, so what the
// user sees never depends on which parser ran. The package must not import
// urfave/cli or anything whose initialisation is heavy; a test checks its
// dependencies.
package clonecore
