package runtime

var archDenied []uintptr
