package dindtest

import "testing"

// TestFlavourKeys: each flavour has its own cache entry, named for it, and
// the key follows the mirror and the package list.
func TestFlavourKeys(t *testing.T) {
	const m = "http://m.example/debian"
	seen := map[string]string{}
	for _, f := range Flavours {
		e := f.entry(f.Key(m))
		if prev, ok := seen[e]; ok {
			t.Errorf("flavours %s and %s share the cache entry %s", prev, f.Name, e)
		}
		seen[e] = f.Name
		if got, ok := FlavourNamed(f.Name); !ok || got.Name != f.Name {
			t.Errorf("FlavourNamed(%q) = %v, %v", f.Name, got, ok)
		}
		if f.Key(m) == f.Key(m+"/") {
			t.Errorf("%s: the key ignores the mirror", f.Name)
		}
		more := f
		more.Packages = append(append([]string{}, f.Packages...), "extra")
		if more.Key(m) == f.Key(m) {
			t.Errorf("%s: the key ignores the packages", f.Name)
		}
	}
	if Key(m) != Bookworm.Key(m) {
		t.Error("Key is not Bookworm's")
	}
	if _, ok := FlavourNamed("nope"); ok {
		t.Error("FlavourNamed found a flavour that does not exist")
	}
}
