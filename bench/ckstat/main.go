// Command ckstat tells what a gVisor checkpoint's kernel state is made
// of, to show what a restore spends its decode on (docs/runtime.md,
// "Checkpoint, restore, fork"): for each saved type, how many objects
// and how many encoded bytes, largest first; then the largest arrays,
// each with the struct field that refers to it. gVisor's decoder
// (pkg/state) handles an array one element at a time through
// reflection, so a big []byte costs far more than its size suggests.
//
// It reads checkpoint.img (uncompressed, as rungv saves it) the way
// gVisor's pkg/state/pretty does, without decoding into the kernel's
// types. Like gVisor's restore, it trusts the file to be a checkpoint
// rungv made: a malformed one gets an error, but gVisor's wire reader
// allocates what the file's lengths say.
//
// usage: ckstat [-n 30] CHECKPOINT_DIR
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"gvisor.dev/gvisor/pkg/state"
	"gvisor.dev/gvisor/pkg/state/statefile"
	"gvisor.dev/gvisor/pkg/state/wire"
)

func main() {
	top := flag.Int("n", 30, "types and arrays to list")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: ckstat [-n N] CHECKPOINT_DIR")
		os.Exit(2)
	}
	s, err := Stat(filepath.Join(flag.Arg(0), "checkpoint.img"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "ckstat:", err)
		os.Exit(1)
	}
	var objs, elems int
	for _, t := range s.Types {
		objs += t.Objects
	}
	for _, a := range s.Arrays {
		elems += a.Len
	}
	fmt.Printf("%d bytes of state, %d objects, %d array elements\n%10s %10s  %s\n", s.Bytes, objs, elems, "objects", "bytes", "type")
	for i, t := range s.Types {
		if i == *top {
			break
		}
		fmt.Printf("%10d %10d  %s\n", t.Objects, t.Bytes, t.Name)
	}
	fmt.Printf("\n%10s %10s  %s\n", "elements", "bytes", "array, referred to by")
	for i, a := range s.Arrays {
		if i == *top {
			break
		}
		fmt.Printf("%10d %10d  %s\n", a.Len, a.Bytes, a.Via)
	}
}

// Stats are what Stat found.
type Stats struct {
	Bytes  int64   // of the state stream
	Types  []Tally // largest first
	Arrays []Array // largest first
}

// Tally is the objects of one type.
type Tally struct {
	Name    string
	Objects int
	Bytes   int64
}

// Array is one saved array object.
type Array struct {
	Len   int
	Bytes int64
	Via   string // TYPE.FIELD of a struct that refers to it ("?" if none found)
}

// counter counts the bytes read through it.
type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

type objectID struct{ graph, id uint64 }

// Stat tallies the objects of every graph in the state file at path.
func Stat(path string) (s *Stats, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sr, _, err := statefile.NewReader(f, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (not an uncompressed gVisor state file?)", path, err)
	}
	c := &counter{r: bufio.NewReaderSize(sr, 1<<20)}
	wr := &wire.Reader{Reader: c}
	defer func() {
		if r := recover(); r != nil { // wire.Load panics on bad input
			s, err = nil, fmt.Errorf("%s: malformed state at byte %d: %v", path, c.n, r)
		}
	}()
	byType := map[string]*Tally{}
	via := map[objectID]string{}
	arrays := map[objectID]*Array{}
	var graph uint64
	for {
		length, object, err := state.ReadHeader(wr)
		if err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if !object {
			graph++
			if _, err := io.CopyN(io.Discard, c, int64(length)); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			continue
		}
		var types []*wire.Type // type IDs count from 1 in each graph
		for i := uint64(0); i < length; {
			switch we := wire.Load(wr).(type) {
			case *wire.Type:
				types = append(types, we)
			case wire.Uint:
				at := c.n
				o := wire.Load(wr)
				name := kind(o, types)
				t := byType[name]
				if t == nil {
					t = &Tally{Name: name}
					byType[name] = t
				}
				t.Objects++
				t.Bytes += c.n - at
				if a, ok := o.(*wire.Array); ok {
					arrays[objectID{graph, uint64(we)}] = &Array{Len: len(a.Contents), Bytes: c.n - at}
				}
				refs(o, name, types, func(root uint64, field string) {
					if _, ok := via[objectID{graph, root}]; !ok {
						via[objectID{graph, root}] = field
					}
				})
				i++
			default:
				return nil, fmt.Errorf("%s: wanted a type or an object ID, got %T", path, we)
			}
		}
	}
	s = &Stats{Bytes: c.n}
	for _, t := range byType {
		s.Types = append(s.Types, *t)
	}
	sort.Slice(s.Types, func(i, j int) bool { return s.Types[i].Bytes > s.Types[j].Bytes })
	for id, a := range arrays {
		a.Via = "?"
		if v, ok := via[id]; ok {
			a.Via = v
		}
		s.Arrays = append(s.Arrays, *a)
	}
	sort.Slice(s.Arrays, func(i, j int) bool { return s.Arrays[i].Bytes > s.Arrays[j].Bytes })
	return s, nil
}

// kind names an encoded object: its struct type, or its wire kind.
func kind(o wire.Object, types []*wire.Type) string {
	if x, ok := o.(*wire.Struct); ok {
		if t := typeOf(x.TypeID, types); t != nil {
			return t.Name
		}
		return fmt.Sprintf("type#%d", x.TypeID)
	}
	return fmt.Sprintf("(%T)", o)
}

func typeOf(id wire.TypeID, types []*wire.Type) *wire.Type {
	if id >= 1 && int(id) <= len(types) {
		return types[id-1]
	}
	return nil
}

// refs calls fn for every reference in o, with the TYPE.FIELD it sits
// in (where as the name of o itself when it is not in a struct's field).
func refs(o wire.Object, where string, types []*wire.Type, fn func(root uint64, field string)) {
	switch x := o.(type) {
	case *wire.Struct:
		t := typeOf(x.TypeID, types)
		for i := 0; i < x.Fields(); i++ {
			f := where
			if t != nil && i < len(t.Fields) {
				f = t.Name + "." + t.Fields[i]
			}
			refs(*x.Field(i), f, types, fn)
		}
	case *wire.Ref:
		fn(uint64(x.Root), where)
	case *wire.Slice:
		fn(uint64(x.Ref.Root), where)
	case *wire.Array:
		for _, e := range x.Contents {
			refs(e, where, types, fn)
		}
	case *wire.Map:
		for i := range x.Keys {
			refs(x.Keys[i], where, types, fn)
			refs(x.Values[i], where, types, fn)
		}
	case *wire.Interface:
		refs(x.Value, where, types, fn)
	}
}
