// Package lockdown holds the mechanisms with which rungv's host processes
// give up what they no longer need once an episode's setup is done:
// capabilities (DropCaps: bounding, ambient, inheritable, effective and
// permitted sets, on every thread), Landlock (LandlockRestrict: no
// file-system access by path but what a Rule grants) and the assembler of
// the seccomp allowlists (Insn, Assemble: labels resolved into forward
// jumps; a jump to nowhere or backwards is an error, never a program).
//
// Contract: each function acts on the calling process (every thread, or
// with LandlockRestrictHandled's thisThread the calling one) and only ever
// takes rights away; none can be given back. Where the kernel lacks a
// mechanism (no Landlock: LandlockABI returns 0) the caller decides
// whether to go on; DropCaps without capabilities succeeds, having
// nothing to drop.
//
// Trust boundary: the caller is rungv itself, before it runs anything a
// guest controls; the inputs (paths, capability numbers) are rungv's own,
// never a guest's. Which process keeps what (the profiles: the host side,
// the supervisor, init, the seccomp-only sandbox) is package runtime's
// policy, with the seccomp allowlists (runtime/lockdown_linux.go and
// docs/runtime.md, "Self-lockdown").
package lockdown
