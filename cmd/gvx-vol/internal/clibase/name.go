package clibase

import (
	"strconv"
	"unicode/utf8"
)

// Name renders a file name (or a symlink's target) read from a volume or
// image for a terminal: as it is when every rune of it is printable, else
// Go-quoted, as `ls -b` and `ls --quoting-style=c` do. A guest wrote those
// names: raw, an ESC or CSI sequence in one would drive the caller's
// terminal (retitle it, clear it, hide the lines before), and a newline
// or carriage return would forge lines of the listing. A printable name
// that begins with a double quote is quoted too, so a quoted rendering
// is never mistaken for a name.
func Name(s string) string {
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
