// Package termsafe renders text a guest made (file names, symlink targets,
// its output, its daemon's words) for a terminal or a line-based log: as it
// is when every rune of it is printable, else Go-quoted, as `ls -b` and
// `ls --quoting-style=c` do. Raw, an ESC or CSI sequence would drive the
// reader's terminal (retitle it, clear it, hide the lines before) and a
// newline or carriage return would forge lines of the host's own. It has
// no dependencies beyond the standard library: gvx-vol's fast clone path
// may link it.
package termsafe

import (
	"strconv"
	"unicode/utf8"
)

// String is s as it is when every rune of it is printable (strconv.IsPrint:
// letters, marks, numbers, punctuation, symbols and the ASCII space), else
// strconv.Quote(s). A printable s that begins with a double quote is
// quoted too, so a quoted rendering is never mistaken for a name.
func String(s string) string {
	if s != "" && s[0] == '"' {
		return strconv.Quote(s)
	}
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || !strconv.IsPrint(r) {
			return strconv.Quote(s)
		}
		i += n
	}
	return s
}
