package ext4lite

import (
	"io/fs"
	"sort"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
	"z.gfire.dev/gvx/sink"
)

// DirEntry is one entry of a directory.
type DirEntry struct {
	Name string
	Ino  Ino
	Type uint32 // sink.Type* bits
}

func checkName(name string) error {
	if name == "" || name == "." || name == ".." || containsSlashOrNul(name) {
		return errInvalid
	}
	if len(name) > disk.MaxNameLen {
		return errTooLong
	}
	return nil
}

// Lookup returns the inode of name in directory dir ("." and ".." too).
// A name longer than 255 bytes is ENAMETOOLONG (as ext4_lookup answers),
// not absent: no such name can exist.
func (v *FS) Lookup(dir Ino, name string) (Ino, error) {
	if len(name) > disk.MaxNameLen {
		return 0, errTooLong
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	_, d, err := v.dirLocked(dir)
	if err != nil {
		return 0, err
	}
	switch name {
	case ".":
		return dir, nil
	case "..":
		return Ino(d.parent), nil
	}
	de, ok := d.entries[name]
	if !ok {
		return 0, fs.ErrNotExist
	}
	return Ino(de.ino), nil
}

// Entries lists a directory, sorted by name.
func (v *FS) Entries(dir Ino) ([]DirEntry, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	_, d, err := v.dirLocked(dir)
	if err != nil {
		return nil, err
	}
	out := make([]DirEntry, 0, len(d.entries))
	for name, de := range d.entries {
		out = append(out, DirEntry{Name: name, Ino: Ino(de.ino), Type: typeOfFt(de.ft)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func typeOfFt(ft uint8) uint32 {
	switch ft {
	case disk.FtReg:
		return sink.TypeReg
	case disk.FtDir:
		return sink.TypeDir
	case disk.FtChr:
		return sink.TypeChar
	case disk.FtBlk:
		return sink.TypeBlock
	case disk.FtFifo:
		return sink.TypeFifo
	case disk.FtSock:
		return sink.TypeSocket
	case disk.FtSymlink:
		return sink.TypeSymlink
	}
	return 0
}

// ReadDir returns a directory's entry names, sorted (sink.Source).
func (v *FS) ReadDir(p string) ([]string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	in, err := v.lookupFor("readdir", p)
	if err != nil {
		return nil, err
	}
	d, err := v.loadDir(in)
	if err != nil {
		return nil, pathErr("readdir", p, err)
	}
	return d.sortedNames(), nil
}
