package overlay

import (
	"bytes"
	"os/exec"
	"testing"
)

// BenchmarkGNUTarExtract races GNU tar on the ImportTar fixtures, into a
// host directory as ImportTar/*/hostdir does.
func BenchmarkGNUTarExtract(b *testing.B) {
	if _, err := exec.LookPath("tar"); err != nil {
		b.Skip("no tar")
	}
	for _, name := range []string{"small", "large"} {
		data := benchFixtures(b)[name]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				b.StopTimer()
				dir := b.TempDir()
				cmd := exec.Command("tar", "--xattrs", "--xattrs-include=*", "--numeric-owner", "-xpf", "-", "-C", dir)
				cmd.Stdin = bytes.NewReader(data)
				b.StartTimer()
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%v: %s", err, out)
				}
			}
		})
	}
}
