// Package privdir checks the directories gvx trusts, and makes unix
// sockets where no one else can act on them.
//
// A directory gvx keeps state in (rungv serve's state directory and its
// episode directories, a checkpoint directory, the image cache) is trusted:
// what is in it is believed (a record naming a PID to kill, a socket to
// send an exec to, a saved kernel to restore). So it is never assumed to
// be private because gvx would have made it so: another local user may
// have made it first, world-writable, or put a symlink in its place. Check
// opens it without following a symlink (O_NOFOLLOW|O_DIRECTORY) and
// fstats the descriptor; it is refused unless it is owned by the caller
// (or by root, for a cache shared read-only) and writable by no one else.
// Ensure makes it (mode 0700) first if it is missing.
//
// The check covers the directory itself, not its ancestors: whoever may
// rename entries of its parent may still swap it after the check. The
// defaults gvx picks live in parents no one else can rename in
// ($XDG_RUNTIME_DIR, /run, a sticky /tmp); a path the user gives is the
// user's to choose.
//
// ListenUnix (Linux) binds a unix socket inside a new private directory
// made next to the target, sets its mode there and renames it into place,
// so a user who owns the target's directory cannot swap the fresh socket
// for a symlink and have the mode set on something else.
//
// On Windows, Check and Ensure only make and stat the directory: its
// permissions are ACLs, which this package does not judge.
package privdir
