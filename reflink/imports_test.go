package reflink

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports keeps the package a leaf: the standard library, x/sys and
// internal/durable (itself the same) only (DESIGN.md), so the runtime, the SDK and gvx-vol can all use it and
// it never drags in a CLI framework.
func TestImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			if strings.Contains(first, ".") && !strings.HasPrefix(path, "golang.org/x/sys/") && path != "z.gfire.dev/gvx/internal/durable" {
				t.Errorf("%s imports %s: reflink may use only the standard library, golang.org/x/sys and internal/durable", name, path)
			}
		}
	}
}
