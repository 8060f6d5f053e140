// Package termsafe renders text a guest made (file names, symlink targets,
// its output, its daemon's words) for a terminal or a line-based log: as it
// is when every rune of it is printable, else Go-quoted, as `ls -b` and
// `ls --quoting-style=c` do. Raw, an ESC or CSI sequence would drive the
// reader's terminal (retitle it, clear it, hide the lines before) and a
// newline or carriage return would forge lines of the host's own. It has
// no dependencies beyond the standard library.
package termsafe

import (
	"fmt"
	"strconv"
	"strings"
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

// Message is an error message or other host text that may carry a
// guest's words for a terminal: newlines and tabs stay (messages use
// them), every other rune String would quote is escaped in place as Go
// writes it inside a quoted string (ESC as \x1b, CR as \r, U+202E as
// \u202e, a byte that is not UTF-8 as \xff). A message whose runes are
// all printable is returned as it is.
func Message(s string) string {
	clean := true
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !keep(r, n) {
			clean = false
			break
		}
		i += n
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case keep(r, n):
			b.WriteString(s[i : i+n])
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}

func keep(r rune, n int) bool {
	if r == utf8.RuneError && n == 1 {
		return false
	}
	return r == '\n' || r == '\t' || strconv.IsPrint(r)
}
