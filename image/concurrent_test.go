package image

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"z.gfire.dev/gvx/image/imagetest"
)

// TestConcurrentAddProcesses starts four processes adding one image to one
// cache at the same instant: exactly one builds it, all report the same
// file, the cache holds one entry and no temporary file.
func TestConcurrentAddProcesses(t *testing.T) {
	// Big enough layers that the build takes a while and the others wait.
	var es []imagetest.Entry
	for i := 0; i < 200; i++ {
		es = append(es, imagetest.File("data/f"+strings.Repeat("x", i%50)+string(rune('a'+i%26))+string(rune('a'+i/26)), strings.Repeat("gvx ", 4096)))
	}
	img := fixtureImage(t, amd64, append(fixtureLayers(t), mustTar(t, es...)))
	lay := t.TempDir()
	if err := imagetest.WriteLayout(lay, img, "v1"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	goFile := filepath.Join(t.TempDir(), "go")
	const n = 4
	cmds := make([]*exec.Cmd, n)
	outs := make([]*bytes.Buffer, n)
	for i := range cmds {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envHelperCache+"="+dir, envHelperSrc+"=oci:"+lay, envHelperGo+"="+goFile)
		outs[i] = new(bytes.Buffer)
		cmd.Stdout = outs[i]
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var results []Result
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
		var r Result
		if err := json.Unmarshal(outs[i].Bytes(), &r); err != nil {
			t.Fatalf("process %d printed %q: %v", i, outs[i], err)
		}
		results = append(results, r)
	}
	created := 0
	for _, r := range results {
		if r.Created {
			created++
		}
		if r.EROFS != results[0].EROFS || r.Digest != results[0].Digest || r.Config != results[0].Config {
			t.Errorf("results differ: %+v vs %+v", r, results[0])
		}
	}
	if created != 1 {
		t.Errorf("%d processes built the image, want exactly 1", created)
	}
	objs, err := os.ReadDir(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range objs {
		names = append(names, o.Name())
	}
	if len(names) != 3 {
		t.Errorf("objects/ holds %v, want one erofs, one report, one config", names)
	}
	if tmp, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(tmp) != 0 {
		t.Errorf("spool files left: %v", tmp)
	}
	c := openCacheAt(t, dir)
	if l, err := List(c); err != nil || len(l) != 1 {
		t.Errorf("index: %v %v, want one entry", l, err)
	}
	checkFlattened(t, results[0].EROFS, "runtime", append(fixtureLayers(t), mustTar(t, es...)))
}
