// Package passwd resolves docker run's --user against an image's
// /etc/passwd and /etc/group (untrusted: read bounded, never trusted to be
// well formed). It imports no gVisor code, so it can be fuzzed.
package passwd

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"z.gfire.dev/gvx/sink"
)

// ErrUnknown reports a user or group name the image does not define.
var ErrUnknown = errors.New("no matching entries")

// User is a resolved --user.
type User struct {
	UID, GID uint32
	Groups   []uint32 // supplementary groups from /etc/group
	Home     string   // from /etc/passwd; "" when the user has no entry
}

// maxPasswdSize bounds how much of the image's /etc/passwd or /etc/group is
// read: they come from an untrusted image.
const maxPasswdSize = 4 << 20

// readEtc returns the lines of an image file, or nil if it is absent or not
// a regular file.
func readEtc(src sink.Source, name string) []string {
	if src == nil {
		return nil
	}
	h, err := src.Lstat(name)
	if err != nil || h.Type() != sink.TypeReg {
		return nil
	}
	rc, err := src.Open(name)
	if err != nil {
		return nil
	}
	defer rc.Close()
	var lines []string
	sc := bufio.NewScanner(io.LimitReader(rc, maxPasswdSize))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// Resolve resolves "user[:group]" (names or numbers) the way docker run
// does, against the image's /etc/passwd and /etc/group (src may be nil).
func Resolve(src sink.Source, spec string) (User, error) {
	if spec == "" {
		spec = "0"
	}
	userPart, groupPart, hasGroup := strings.Cut(spec, ":")
	passwd := readEtc(src, "etc/passwd")
	var u User
	var userName string
	found := false
	if n, err := strconv.ParseUint(userPart, 10, 32); err == nil {
		u.UID = uint32(n)
		for _, l := range passwd {
			f := strings.Split(l, ":")
			if len(f) >= 7 && f[2] == userPart {
				u.GID, userName, u.Home, found = parseID(f[3]), f[0], f[5], true
				break
			}
		}
	} else {
		for _, l := range passwd {
			f := strings.Split(l, ":")
			if len(f) >= 7 && f[0] == userPart {
				u.UID, u.GID, userName, u.Home, found = parseID(f[2]), parseID(f[3]), f[0], f[5], true
				break
			}
		}
		if !found {
			return u, fmt.Errorf("unable to find user %s: %w in passwd file", userPart, ErrUnknown)
		}
	}
	groups := readEtc(src, "etc/group")
	if hasGroup {
		if n, err := strconv.ParseUint(groupPart, 10, 32); err == nil {
			u.GID = uint32(n)
		} else {
			ok := false
			for _, l := range groups {
				f := strings.Split(l, ":")
				if len(f) >= 4 && f[0] == groupPart {
					u.GID, ok = parseID(f[2]), true
					break
				}
			}
			if !ok {
				return u, fmt.Errorf("unable to find group %s: %w in group file", groupPart, ErrUnknown)
			}
		}
	}
	if userName != "" && !hasGroup {
		for _, l := range groups {
			f := strings.Split(l, ":")
			if len(f) < 4 {
				continue
			}
			for _, m := range strings.Split(f[3], ",") {
				if m == userName {
					u.Groups = append(u.Groups, parseID(f[2]))
				}
			}
		}
	}
	if len(u.Groups) == 0 {
		u.Groups = []uint32{u.GID} // as runc does for docker
	}
	return u, nil
}

func parseID(s string) uint32 {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0
	}
	return uint32(n)
}
