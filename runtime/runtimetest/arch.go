package runtimetest

import "runtime"

func goarch() string { return runtime.GOARCH }
