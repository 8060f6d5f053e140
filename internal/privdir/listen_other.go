//go:build unix && !linux

package privdir

import "path/filepath"

// bindAddr is the address to bind name in the directory dir (open as
// dfd). Without /proc the path is used: were dir swapped meanwhile, the
// socket would land elsewhere, and ListenUnix's chmod through dfd fail.
func bindAddr(dfd int, dir, name string) string { return filepath.Join(dir, name) }

func renameNoReplace(olddfd int, old string, newdfd int, new string) error {
	return renameCheck(olddfd, old, newdfd, new)
}
