package runtime

// archSyscalls: arm64 has only the generic syscall table, all in
// baseSyscalls.
var archSyscalls []uintptr
