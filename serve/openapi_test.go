package serve_test

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"z.gfire.dev/gvx/reflink"
	"z.gfire.dev/gvx/serve"
)

// TestOpenAPIRoutes: every path and method docs/openapi.yaml lists is a
// route of the handler (the mux answers unknown ones with its own plain
// 404 or 405; our handlers answer JSON).
func TestOpenAPIRoutes(t *testing.T) {
	f, err := os.Open("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	srv, err := serve.New(serve.Config{StateDir: filepath.Join(shortDir(t), "st"), Rungv: "/bin/true", CloneMode: reflink.Auto})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	h := srv.Handler("")
	pathRe := regexp.MustCompile(`^  (/[^:]*):$`)
	methodRe := regexp.MustCompile(`^    (get|put|post|delete):`)
	cur, n := "", 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := pathRe.FindStringSubmatch(sc.Text()); m != nil {
			cur = strings.ReplaceAll(m[1], "{id}", "0123")
			continue
		}
		m := methodRe.FindStringSubmatch(sc.Text())
		if m == nil || cur == "" {
			continue
		}
		n++
		req := httptest.NewRequest(strings.ToUpper(m[1]), cur+"?path=/x", strings.NewReader("{}"))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code == http.StatusMethodNotAllowed || !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") && !strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain; version") {
			t.Errorf("%s %s: %d %q %q: not a route of the handler", m[1], cur, w.Code, w.Header().Get("Content-Type"), w.Body.String())
		}
	}
	if n < 13 {
		t.Errorf("found %d operations in openapi.yaml, want 13", n)
	}
}
