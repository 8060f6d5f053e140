package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKubernetesManifestsRestricted: every workload in deploy/kubernetes
// carries the restricted Pod Security Standard's security context (what
// TestRestrictedContainer gives its container) and uses no volume type or
// host access the standard forbids.
func TestKubernetesManifestsRestricted(t *testing.T) {
	files, err := filepath.Glob("../../deploy/kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	workloads := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		for _, bad := range []string{"hostPath", "privileged: true", "hostNetwork", "hostPID", "hostIPC", "allowPrivilegeEscalation: true", "Unconfined"} {
			if strings.Contains(s, bad) {
				t.Errorf("%s: %q is not allowed under the restricted standard", f, bad)
			}
		}
		if !strings.Contains(s, "kind: Pod") && !strings.Contains(s, "kind: Job") && !strings.Contains(s, "kind: DaemonSet") {
			continue
		}
		workloads++
		for _, want := range []string{"runAsNonRoot: true", "allowPrivilegeEscalation: false", `drop: ["ALL"]`, "type: RuntimeDefault", "readOnlyRootFilesystem: true", "emptyDir"} {
			if !strings.Contains(s, want) {
				t.Errorf("%s: missing %q", f, want)
			}
		}
	}
	if workloads == 0 {
		t.Fatal("no workload manifests")
	}
}
