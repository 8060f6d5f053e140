package testimage

import "runtime"

func goarch() string { return runtime.GOARCH }
