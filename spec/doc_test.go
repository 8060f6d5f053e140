package spec

import (
	"go/parser"
	"go/token"
	"testing"
)

// docComment returns the package doc of doc.go as go/ast reads it.
func docComment(t *testing.T) string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	return f.Doc.Text()
}
