package runtime

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestPatchBootArgs(t *testing.T) {
	dir := t.TempDir()
	write := func(ann string) {
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"annotations":{`+ann+`}}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"--root=/r", "boot", "--bundle=" + dir, "--total-memory", "999", "--attached", "--io-fds=4", "cid"}
	write(`"dev.gvx.total-memory":"536870912","dev.gvx.cpu-num":"2"`)
	got := patchBootArgs(args)
	want := []string{"--root=/r", "boot", "--bundle=" + dir, "--total-memory=536870912", "--attached", "--io-fds=4", "--cpu-num=2", "cid"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	write(``)
	if got := patchBootArgs(args); !reflect.DeepEqual(got, args) {
		t.Fatalf("without annotations: %q", got)
	}
	other := []string{"--root=/r", "gofer", "--bundle=" + dir, "cid"}
	if got := patchBootArgs(other); !reflect.DeepEqual(got, other) {
		t.Fatalf("gofer args changed: %q", got)
	}
}
