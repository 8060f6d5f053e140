package runtime

import (
	"encoding/json"
	"fmt"
	"golang.org/x/sys/unix"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Annotations carrying the guest's memory and CPU count to the sandbox
// process. runsc derives --total-memory and --cpu-num of its boot command
// from host cgroups only, and episodes use none (--ignore-cgroups), so
// Main rewrites the boot command line from these.
const (
	annTotalMemory = "dev.gvx.total-memory"
	annCPUNum      = "dev.gvx.cpu-num"
)

// patchBootArgs returns args (runsc's, without argv[0]) with the boot
// command's --total-memory and --cpu-num set from the bundle's
// annotations. Anything else is returned unchanged.
func patchBootArgs(args []string) []string {
	boot := -1
	for i, a := range args {
		if a == "boot" {
			boot = i
			break
		}
	}
	if boot < 0 {
		return args
	}
	bundle := ""
	for _, a := range args[boot+1:] {
		if v, ok := strings.CutPrefix(a, "--bundle="); ok {
			bundle = v
		}
	}
	if bundle == "" {
		return args
	}
	b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		return args
	}
	var spec struct {
		Annotations map[string]string `json:"annotations"`
	}
	if json.Unmarshal(b, &spec) != nil {
		return args
	}
	out := append([]string{}, args[:boot+1]...)
	rest := args[boot+1:]
	set := map[string]string{}
	if v, err := strconv.ParseUint(spec.Annotations[annTotalMemory], 10, 64); err == nil && v > 0 {
		set["total-memory"] = strconv.FormatUint(v, 10)
	}
	if v, err := strconv.Atoi(spec.Annotations[annCPUNum]); err == nil && v > 0 {
		set["cpu-num"] = strconv.Itoa(v)
	}
	if len(set) == 0 {
		return args
	}
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		name := strings.TrimLeft(a, "-")
		if a == "--" || !strings.HasPrefix(a, "-") {
			out = append(out, rest[i:]...)
			break
		}
		n, _, hasEq := strings.Cut(name, "=")
		if v, ok := set[n]; ok {
			out = append(out, "--"+n+"="+v)
			delete(set, n)
			if !hasEq && i+1 < len(rest) {
				i++ // skip the separate value
			}
			continue
		}
		out = append(out, a)
	}
	// Flags not already present go before the container ID.
	if len(set) > 0 {
		last := out[len(out)-1]
		out = out[:len(out)-1]
		for _, n := range []string{"total-memory", "cpu-num"} {
			if v, ok := set[n]; ok {
				out = append(out, "--"+n+"="+v)
			}
		}
		out = append(out, last)
	}
	return out
}

// pidsLimitEnv passes the episode's pids limit to the supervisor.
const pidsLimitEnv = "GVX_PIDS_LIMIT"

// limitPids is the supervisor's first act: RLIMIT_NPROC (soft and hard)
// from pidsLimitEnv. The supervisor runs in the episode's new user
// namespace, and the kernel counts RLIMIT_NPROC per user namespace (since
// Linux 5.14, ucounts): every task it and its descendants make — init,
// runsc, the sandbox and gofer in their nested namespaces, the systrap
// stubs of every guest process — counts against this one limit, whatever
// the caller's uid. Nothing in the episode can raise it again (that needs
// CAP_SYS_RESOURCE in the initial user namespace).
func limitPids() error {
	v := os.Getenv(pidsLimitEnv)
	os.Unsetenv(pidsLimitEnv)
	if v == "" {
		return nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		return fmt.Errorf("bad %s=%q", pidsLimitEnv, v)
	}
	return unix.Setrlimit(unix.RLIMIT_NPROC, &unix.Rlimit{Cur: n, Max: n})
}
