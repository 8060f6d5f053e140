package image

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"z.gfire.dev/gvx/erofs/cache"
)

// Environment of a re-executed test binary acting as one `image add`
// process (see TestConcurrentAddProcesses).
const (
	envHelperCache = "GVX_IMAGE_TEST_CACHE"
	envHelperSrc   = "GVX_IMAGE_TEST_SOURCE"
	envHelperGo    = "GVX_IMAGE_TEST_GO" // start when this file exists
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(envHelperCache); dir != "" {
		os.Exit(helperAdd(dir, os.Getenv(envHelperSrc), os.Getenv(envHelperGo)))
	}
	os.Exit(m.Run())
}

func helperAdd(dir, src, goFile string) int {
	// Wait for the starting gun so every process races for the same entry.
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := os.Stat(goFile); err == nil {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "helper: no starting signal")
			return 3
		}
		time.Sleep(time.Millisecond)
	}
	c, err := cache.Open(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	res, err := Add(ctx, c, src, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	json.NewEncoder(os.Stdout).Encode(res)
	return 0
}
