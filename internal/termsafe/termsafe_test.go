package termsafe

import "testing"

func TestString(t *testing.T) {
	for in, want := range map[string]string{
		"":                  "",
		"plain name.txt":    "plain name.txt",
		"café ünï 日本":       "café ünï 日本",
		"\x1b]0;pwned\x07":  `"\x1b]0;pwned\a"`,
		"a\nforged":         `"a\nforged"`,
		"cr\rback":          `"cr\rback"`,
		"tab\there":         `"tab\there"`,
		"bad\xffutf8":       `"bad\xffutf8"`,
		"rtl\u202eexe.txt":  `"rtl\u202eexe.txt"`,
		"del\x7f":           `"del\x7f"`,
		`"quoted"`:          `"\"quoted\""`,
		`mid"quote`:         `mid"quote`,
		"nbsp\u00a0between": `"nbsp\u00a0between"`,
	} {
		if got := String(in); got != want {
			t.Errorf("String(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestMessage(t *testing.T) {
	for in, want := range map[string]string{
		"":                               "",
		"write a/b: no space left":       "write a/b: no space left",
		"line one\n  try: --flag\tthere": "line one\n  try: --flag\tthere",
		"open \x1b]0;pwned\x07: corrupt": `open \x1b]0;pwned\a: corrupt`,
		"cr\rback":                       `cr\rback`,
		"bad\xffutf8":                    `bad\xffutf8`,
		"rtl\u202eexe.txt":               `rtl\u202eexe.txt`,
		"csi \u009b2J":                   `csi \u009b2J`,
		"raw \x9b2J":                     `raw \x9b2J`,
		"café \"q\"":                     "café \"q\"",
	} {
		if got := Message(in); got != want {
			t.Errorf("Message(%q) = %q, want %q", in, got, want)
		}
	}
}
