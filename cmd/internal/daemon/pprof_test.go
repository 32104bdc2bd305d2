package daemon

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// get fetches path from d's HTTP API with key (none if empty) and
// returns the response, its body read whole (so its trailers are in),
// and the body.
func get(t *testing.T, d *Daemon, key, path string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+d.HTTPAddr()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// getStatus is get's status code and body.
func getStatus(t *testing.T, d *Daemon, key, path string) (int, []byte) {
	t.Helper()
	resp, body := get(t, d, key, path)
	return resp.StatusCode, body
}

// TestPprofForOperatorsWhenOn: http.pprof serves the daemon's profiles
// to operators, and nobody else; off (the default), there is no such
// route.
func TestPprofForOperatorsWhenOn(t *testing.T) {
	cfg := secureConfig(t)
	cfg.HTTP.Pprof = true
	d := startDaemon(t, cfg)
	visitor := newKey(t, d, KeySpec{Name: "tour-guest", Roles: []string{"visitor"}})
	planner := newKey(t, d, KeySpec{Name: "hope", Roles: []string{"planner"}})

	if status, body := getStatus(t, d, testBootstrapKey, "/debug/pprof/heap?debug=1"); status != http.StatusOK || !bytes.Contains(body, []byte("heap profile:")) {
		t.Errorf("operator's heap profile: %d %.80q", status, body)
	}
	// The binary profile go tool pprof reads: gzipped protobuf.
	if status, body := getStatus(t, d, testBootstrapKey, "/debug/pprof/goroutine"); status != http.StatusOK || !bytes.HasPrefix(body, []byte{0x1f, 0x8b}) {
		t.Errorf("operator's goroutine profile: %d, %d bytes, not gzip", status, len(body))
	}
	if status, body := getStatus(t, d, testBootstrapKey, "/debug/pprof/"); status != http.StatusOK || !bytes.Contains(body, []byte("allocs")) {
		t.Errorf("operator's profile index: %d %.80q", status, body)
	}
	for _, who := range []struct{ name, key string }{{"visitor", visitor.Key}, {"planner", planner.Key}} {
		if status, _ := getStatus(t, d, who.key, "/debug/pprof/heap"); status != http.StatusForbidden {
			t.Errorf("%s got the heap profile: %d, want 403", who.name, status)
		}
	}
	if status, _ := getStatus(t, d, "", "/debug/pprof/heap"); status != http.StatusUnauthorized {
		t.Errorf("no key got the heap profile: %d, want 401", status)
	}

	off := startDaemon(t, testConfig(t.TempDir()))
	if status, _ := getStatus(t, off, "", "/debug/pprof/heap"); status != http.StatusNotFound {
		t.Errorf("with http.pprof off: %d, want 404", status)
	}
}
