package ext4test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrNoTools reports that mkfs.ext4 or debugfs (e2fsprogs) is not
// installed: tests skip.
var ErrNoTools = errors.New("ext4test: mkfs.ext4 and debugfs (e2fsprogs) are needed")

// Shapes of LinkedDirs' volumes.
const (
	// LinkCycle: /a/b/up is /a and /a/b/root is /, as in
	// `debugfs -w: mkdir a; mkdir a/b; link a a/b/up; link / a/b/root`:
	// a/b/up/b/up/… and a/b/root/a/b/root/… never end. /a/f is a file.
	LinkCycle = "cycle"
	// LinkDAG: no cycle, but each of DAGDepth nested directories is named
	// twice in its parent (/n1 and /n1b, /n1/n2 and /n1/n2b, …), so the
	// file at the bottom has 2^DAGDepth paths, each under 200 bytes.
	LinkDAG = "dag"
)

// DAGDepth is the nesting of LinkDAG's volume.
const DAGDepth = 40

// LinkedDirs makes, in dir, an 8 MiB ext4 volume (mkfs.ext4) holding
// hard links to directories (debugfs's link, which the kernel and
// ext4lite never make: only a crafted volume has them) of the given shape,
// and returns its path. Without the tools it returns an error wrapping
// ErrNoTools.
func LinkedDirs(dir, shape string) (string, error) {
	for _, tool := range []string{"mkfs.ext4", "debugfs"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("%w: %v", ErrNoTools, err)
		}
	}
	var cmds []string
	switch shape {
	case LinkCycle:
		cmds = []string{"mkdir a", "mkdir a/b", "write /dev/null a/f", "link a a/b/up", "link / a/b/root"}
	case LinkDAG:
		p := ""
		for i := 1; i <= DAGDepth; i++ {
			d := fmt.Sprintf("%sn%d", p, i)
			cmds = append(cmds, "mkdir "+d, "link "+d+" "+d+"b")
			p = d + "/"
		}
		cmds = append(cmds, "write /dev/null "+p+"f")
	default:
		return "", fmt.Errorf("ext4test: unknown shape %q", shape)
	}
	img := filepath.Join(dir, shape+".ext4")
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-b", "4096", img, "8M").CombinedOutput(); err != nil {
		return "", fmt.Errorf("mkfs.ext4: %v\n%s", err, out)
	}
	script := filepath.Join(dir, shape+".debugfs")
	if err := os.WriteFile(script, []byte(strings.Join(cmds, "\n")+"\n"), 0o644); err != nil {
		return "", err
	}
	out, err := exec.Command("debugfs", "-w", "-f", script, img).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("debugfs: %v\n%s", err, out)
	}
	// debugfs reports a failed command on its output and exits 0: every
	// line must be an echoed command, its banner or "Allocated inode".
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasPrefix(l, "debugfs") && !strings.HasPrefix(l, "Allocated inode") {
			return "", fmt.Errorf("debugfs: %s\n%s", l, out)
		}
	}
	return img, nil
}
