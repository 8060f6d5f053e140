package runtime

import "golang.org/x/sys/unix"

// archSyscalls are the allowlist's entries only amd64 has: the Go runtime's
// netpoller may wait with epoll_wait.
var archSyscalls = []uintptr{unix.SYS_EPOLL_WAIT}
