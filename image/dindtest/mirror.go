package dindtest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// MirrorEnv overrides the mirror found in the host's apt sources.
const MirrorEnv = "GVX_DEBIAN_MIRROR"

// Mirror returns the Debian mirror URI that apt on this host uses for
// suite (e.g. "bookworm"): $GVX_DEBIAN_MIRROR if set, else the first
// source in /etc/apt/sources.list and then /etc/apt/sources.list.d/*.list
// and *.sources (in name order) whose suites include suite and whose
// components include main.
func Mirror(suite string) (string, error) {
	if m := os.Getenv(MirrorEnv); m != "" {
		return m, nil
	}
	return mirrorFrom("/etc/apt", suite)
}

func mirrorFrom(aptDir, suite string) (string, error) {
	files := []string{filepath.Join(aptDir, "sources.list")}
	d := filepath.Join(aptDir, "sources.list.d")
	if ents, err := os.ReadDir(d); err == nil {
		var names []string
		for _, e := range ents {
			if n := e.Name(); strings.HasSuffix(n, ".list") || strings.HasSuffix(n, ".sources") {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		for _, n := range names {
			files = append(files, filepath.Join(d, n))
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var m string
		if strings.HasSuffix(f, ".sources") {
			m = mirrorDeb822(b, suite)
		} else {
			m = mirrorOneLine(b, suite)
		}
		if m != "" {
			return m, nil
		}
	}
	return "", fmt.Errorf("%w for suite %s (set %s)", ErrNoMirror, suite, MirrorEnv)
}

// mirrorOneLine reads the one-line format: "deb [opts] URI SUITE COMP...".
func mirrorOneLine(b []byte, suite string) string {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") { // options, possibly several words
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) == 0 {
				continue
			}
			f = f[1:]
		}
		if len(f) >= 3 && f[1] == suite && contains(f[2:], "main") && usableURI(f[0]) {
			return f[0]
		}
	}
	return ""
}

// mirrorDeb822 reads the deb822 format: stanzas of "Key: value" fields
// separated by blank lines.
func mirrorDeb822(b []byte, suite string) string {
	for _, stanza := range strings.Split(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n\n") {
		fields := map[string]string{}
		key := ""
		for _, line := range strings.Split(stanza, "\n") {
			if strings.HasPrefix(line, "#") {
				continue
			}
			if (strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")) && key != "" {
				fields[key] += " " + strings.TrimSpace(line) // continuation
				continue
			}
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			key = strings.ToLower(strings.TrimSpace(k))
			fields[key] = strings.TrimSpace(v)
		}
		if e := strings.ToLower(fields["enabled"]); e == "no" || e == "false" {
			continue
		}
		if !contains(strings.Fields(fields["types"]), "deb") ||
			!contains(strings.Fields(fields["suites"]), suite) ||
			!contains(strings.Fields(fields["components"]), "main") {
			continue
		}
		for _, u := range strings.Fields(fields["uris"]) {
			if usableURI(u) {
				return u
			}
		}
	}
	return ""
}

// usableURI accepts the schemes debootstrap can fetch from.
func usableURI(u string) bool {
	return strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "file:/")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
