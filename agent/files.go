package agent

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
)

func (a *Agent) readFile(w http.ResponseWriter, r *http.Request) {
	p, err := guestPath(r)
	if err != nil {
		writeError(w, err)
		return
	}
	f, err := os.Open(p)
	if err != nil {
		writeError(w, err)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		writeError(w, err)
		return
	}
	if !st.Mode().IsRegular() {
		writeError(w, errorf(http.StatusBadRequest, "%s is not a regular file (download a directory as an archive)", p))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(st.Size(), 10))
	w.Header().Set("X-Gvx-Mode", unixMode(st.Mode()))
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, f)
}

// writeFile writes the body to path (its parents made 0755), truncating
// an existing file; ?mode= (octal) sets the permission bits of a new file
// (0644).
func (a *Agent) writeFile(w http.ResponseWriter, r *http.Request) {
	p, err := guestPath(r)
	if err != nil {
		writeError(w, err)
		return
	}
	mode := os.FileMode(0o644)
	if m := r.URL.Query().Get("mode"); m != "" {
		v, err := strconv.ParseUint(m, 8, 32)
		if err != nil || v > 0o7777 {
			writeError(w, errorf(http.StatusBadRequest, "mode %q: want octal permission bits such as 0644", m))
			return
		}
		mode = unixToFileMode(uint32(v))
	}
	body := http.MaxBytesReader(w, r.Body, MaxFileBytes)
	n, err := writeFileFrom(p, mode, body)
	if err != nil {
		drain(body)
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"bytes": n})
}

// writeFileFrom writes r to p, truncating an existing file (whose mode
// stays) or making a new one with exactly mode: past the umask, with its
// setuid, setgid and sticky bits.
func writeFileFrom(p string, mode os.FileMode, r io.Reader) (int64, error) {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return 0, err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	created := err == nil
	if errors.Is(err, fs.ErrExist) {
		f, err = os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	}
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, r)
	if created && err == nil {
		err = f.Chmod(mode) // after the data: a write may clear setuid
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// unixToFileMode turns chmod's octal bits (04755) into an os.FileMode:
// os.FileMode(04755) would be 0755 with a bit Go does not read as setuid,
// and os.OpenFile dropped it (a PUT with mode=04755 made a 0755 file).
func unixToFileMode(v uint32) os.FileMode {
	m := os.FileMode(v & 0o777)
	if v&0o4000 != 0 {
		m |= os.ModeSetuid
	}
	if v&0o2000 != 0 {
		m |= os.ModeSetgid
	}
	if v&0o1000 != 0 {
		m |= os.ModeSticky
	}
	return m
}

// unixMode is m's permission bits, setuid, setgid and sticky included, in
// octal as chmod takes them ("0644", "04755").
func unixMode(m os.FileMode) string {
	v := uint64(m.Perm())
	if m&os.ModeSetuid != 0 {
		v |= 0o4000
	}
	if m&os.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&os.ModeSticky != 0 {
		v |= 0o1000
	}
	return "0" + strconv.FormatUint(v, 8)
}
