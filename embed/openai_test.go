package embed

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeVector is what the test server returns for a text: unnormalised,
// and recognisable after normalisation by its first component.
func fakeVector(text string, dims int) []float32 {
	v := make([]float32, dims)
	for i := range v {
		v[i] = 1
	}
	v[0] = float32(len(text))
	return v
}

type fakeRequest struct {
	Model      string   `json:"model"`
	Input      []string `json:"input"`
	Dimensions *int     `json:"dimensions"`
}

type fakeItem struct {
	Index     int       `json:"index"`
	Embedding []float32 `json:"embedding"`
	Object    string    `json:"object"`
}

// embeddingsServer is an OpenAI-compatible test server. Its hooks are
// called with the 1-based request number.
type embeddingsServer struct {
	srv      *httptest.Server
	calls    atomic.Int32
	lastAuth atomic.Value // string
	lastReq  atomic.Value // fakeRequest
	dims     int
	// hook, when set, runs first; false means it answered the request.
	hook func(n int, w http.ResponseWriter, r *http.Request) bool
	// respond, when set, may rewrite the items (reorder, corrupt)
	// before they are sent; false means it answered the request.
	respond func(n int, w http.ResponseWriter, items []fakeItem) bool
}

func newEmbeddingsServer(t *testing.T, dims int) *embeddingsServer {
	s := &embeddingsServer{dims: dims}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *embeddingsServer) serve(w http.ResponseWriter, r *http.Request) {
	n := int(s.calls.Add(1))
	if s.hook != nil && !s.hook(n, w, r) {
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
		http.Error(w, "wrong route "+r.Method+" "+r.URL.Path, http.StatusNotFound)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		http.Error(w, "content type "+ct, http.StatusUnsupportedMediaType)
		return
	}
	s.lastAuth.Store(r.Header.Get("Authorization"))
	var req fakeRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad json: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.lastReq.Store(req)
	items := make([]fakeItem, len(req.Input))
	for i, in := range req.Input {
		items[i] = fakeItem{Index: i, Embedding: fakeVector(in, s.dims), Object: "embedding"}
	}
	if s.respond != nil && !s.respond(n, w, items) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"object": "list", "data": items, "model": req.Model,
		"usage": map[string]int{"prompt_tokens": 1, "total_tokens": 1},
	})
}

func newTestOpenAI(t *testing.T, base string, mod func(*OpenAIOptions)) *OpenAI {
	t.Helper()
	o := OpenAIOptions{
		BaseURL:      base,
		Model:        "text-embedding-3-small",
		Dimensions:   8,
		RetryBackoff: time.Millisecond,
		MaxBackoff:   5 * time.Millisecond,
	}
	if mod != nil {
		mod(&o)
	}
	p, err := NewOpenAI(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// checkVector asserts v is the normalised fakeVector of text.
func checkVector(t *testing.T, v []float32, text string) {
	t.Helper()
	want := fakeVector(text, len(v))
	var n float64
	for _, x := range want {
		n += float64(x) * float64(x)
	}
	n = math.Sqrt(n)
	for i := range v {
		if math.Abs(float64(v[i])-float64(want[i])/n) > 1e-6 {
			t.Fatalf("vector of %q: component %d = %v, want %v", text, i, v[i], float64(want[i])/n)
		}
	}
}

func TestOpenAISuccess(t *testing.T) {
	s := newEmbeddingsServer(t, 8)
	p := newTestOpenAI(t, s.srv.URL, func(o *OpenAIOptions) { o.APIKey = "sk-test" })
	if p.Dimensions() != 8 {
		t.Fatalf("Dimensions = %d", p.Dimensions())
	}
	v, err := p.Embed(context.Background(), "pick up the red block")
	if err != nil {
		t.Fatal(err)
	}
	checkVector(t, v, "pick up the red block")
	if n := norm(v); math.Abs(n-1) > 1e-6 {
		t.Fatalf("norm = %v", n)
	}
	if got := s.lastAuth.Load(); got != "Bearer sk-test" {
		t.Fatalf("Authorization = %q", got)
	}
	req := s.lastReq.Load().(fakeRequest)
	if req.Model != "text-embedding-3-small" || req.Dimensions == nil || *req.Dimensions != 8 ||
		!slices.Equal(req.Input, []string{"pick up the red block"}) {
		t.Fatalf("request = %+v", req)
	}
}

func TestOpenAIOmitDimensionsAndNoKey(t *testing.T) {
	s := newEmbeddingsServer(t, 8)
	p := newTestOpenAI(t, s.srv.URL+"/v1/", func(o *OpenAIOptions) { o.OmitDimensions = true })
	if _, err := p.Embed(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	if got := s.lastAuth.Load(); got != "" {
		t.Fatalf("Authorization = %q, want none", got)
	}
	if req := s.lastReq.Load().(fakeRequest); req.Dimensions != nil {
		t.Fatalf("dimensions sent: %d", *req.Dimensions)
	}
}

func TestOpenAIOrderingAndBatching(t *testing.T) {
	s := newEmbeddingsServer(t, 8)
	s.respond = func(_ int, _ http.ResponseWriter, items []fakeItem) bool {
		slices.Reverse(items) // servers may answer in any order
		return true
	}
	p := newTestOpenAI(t, s.srv.URL, func(o *OpenAIOptions) { o.BatchSize = 3 })
	texts := []string{"a", "bb", "ccc", "dddd", "eeeee", "ffffff", "ggggggg"}
	vs, err := p.EmbedBatch(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != len(texts) {
		t.Fatalf("got %d vectors", len(vs))
	}
	for i, v := range vs {
		checkVector(t, v, texts[i])
	}
	if got := s.calls.Load(); got != 3 {
		t.Fatalf("requests = %d, want 3 (batches of 3, 3, 1)", got)
	}
}

func TestOpenAIRetries(t *testing.T) {
	tests := []struct {
		name      string
		fail      int // the first fail requests get status
		status    int
		retries   int
		wantCalls int32
		wantErr   string // empty: success
	}{
		{"500 then success", 1, http.StatusInternalServerError, 0, 2, ""},
		{"429 twice then success", 2, http.StatusTooManyRequests, 0, 3, ""},
		{"503 exhausts retries", 100, http.StatusServiceUnavailable, 2, 3, "gave up after 3 attempts"},
		{"retries disabled", 100, http.StatusBadGateway, -1, 1, "status 502"},
		{"400 is not retried", 100, http.StatusBadRequest, 0, 1, "status 400 Bad Request: {\"error\": {\"message\": \"model not found\"}}"},
		{"401 is not retried", 100, http.StatusUnauthorized, 0, 1, "status 401"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newEmbeddingsServer(t, 8)
			s.respond = func(n int, w http.ResponseWriter, _ []fakeItem) bool {
				if n > tc.fail {
					return true
				}
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, "{\"error\":\n   {\"message\": \"model not found\"}}")
				return false
			}
			p := newTestOpenAI(t, s.srv.URL, func(o *OpenAIOptions) { o.MaxRetries = tc.retries })
			v, err := p.Embed(context.Background(), "open the drawer")
			if got := s.calls.Load(); got != tc.wantCalls {
				t.Errorf("requests = %d, want %d", got, tc.wantCalls)
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				checkVector(t, v, "open the drawer")
				return
			}
			if !errors.Is(err, ErrProvider) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want ErrProvider containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestOpenAIBadResponses(t *testing.T) {
	tests := []struct {
		name    string
		corrupt func(w http.ResponseWriter, items []fakeItem) bool
		want    error
		wantMsg string
	}{
		{"wrong dimension", func(_ http.ResponseWriter, items []fakeItem) bool {
			items[1].Embedding = items[1].Embedding[:5]
			return true
		}, ErrDimension, "text 1: provider returned 5 values, want 8"},
		{"NaN literal", func(w http.ResponseWriter, _ []fakeItem) bool {
			_, _ = io.WriteString(w, `{"data":[{"index":0,"embedding":[NaN,1,1,1,1,1,1,1]},{"index":1,"embedding":[1,1,1,1,1,1,1,1]}]}`)
			return false
		}, ErrProvider, "decode response"},
		{"overflowing value", func(w http.ResponseWriter, _ []fakeItem) bool {
			_, _ = io.WriteString(w, `{"data":[{"index":0,"embedding":[1e300,1,1,1,1,1,1,1]},{"index":1,"embedding":[1,1,1,1,1,1,1,1]}]}`)
			return false
		}, ErrProvider, "decode response"},
		{"zero vector", func(_ http.ResponseWriter, items []fakeItem) bool {
			items[0].Embedding = make([]float32, 8)
			return true
		}, ErrProvider, "text 0: vector has zero"},
		{"missing item", func(_ http.ResponseWriter, items []fakeItem) bool {
			items[1] = items[0]
			return true
		}, ErrProvider, "repeats index 0"},
		{"index out of range", func(_ http.ResponseWriter, items []fakeItem) bool {
			items[1].Index = 7
			return true
		}, ErrProvider, "index 7 out of range"},
		{"not JSON", func(w http.ResponseWriter, _ []fakeItem) bool {
			_, _ = io.WriteString(w, "<html>gateway</html>")
			return false
		}, ErrProvider, "decode response"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newEmbeddingsServer(t, 8)
			s.respond = func(_ int, w http.ResponseWriter, items []fakeItem) bool { return tc.corrupt(w, items) }
			p := newTestOpenAI(t, s.srv.URL, nil)
			_, err := p.EmbedBatch(context.Background(), []string{"a", "b"})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("error = %v, want %v containing %q", err, tc.want, tc.wantMsg)
			}
			if got := s.calls.Load(); got != 1 {
				t.Fatalf("requests = %d, want 1 (bad responses are not retried)", got)
			}
		})
	}
}

func TestOpenAIEmptyText(t *testing.T) {
	s := newEmbeddingsServer(t, 8)
	p := newTestOpenAI(t, s.srv.URL, nil)
	if _, err := p.Embed(context.Background(), " "); !errors.Is(err, ErrEmptyText) {
		t.Fatalf("Embed error = %v", err)
	}
	_, err := p.EmbedBatch(context.Background(), []string{"ok", ""})
	if !errors.Is(err, ErrEmptyText) || !strings.Contains(err.Error(), "text 1") {
		t.Fatalf("EmbedBatch error = %v", err)
	}
	if vs, err := p.EmbedBatch(context.Background(), nil); err != nil || len(vs) != 0 {
		t.Fatalf("EmbedBatch(nil) = %v, %v", vs, err)
	}
	if got := s.calls.Load(); got != 0 {
		t.Fatalf("requests = %d, want 0", got)
	}
}

func TestOpenAIContextCancel(t *testing.T) {
	s := newEmbeddingsServer(t, 8)
	started := make(chan struct{})
	s.hook = func(_ int, _ http.ResponseWriter, r *http.Request) bool {
		close(started)
		hang(r)
		return false
	}
	p := newTestOpenAI(t, s.srv.URL, nil)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := p.Embed(ctx, "open the drawer")
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
	if got := s.calls.Load(); got != 1 {
		t.Fatalf("requests = %d, want 1 (no retry after cancel)", got)
	}
}

// hang blocks a handler until the client goes away. The body must be
// read first: only then does net/http watch the connection for a close.
func hang(r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	<-r.Context().Done()
}

// TestOpenAIAttemptTimeout checks that a hung attempt is abandoned after
// Timeout and retried, without the caller's context expiring.
func TestOpenAIAttemptTimeout(t *testing.T) {
	s := newEmbeddingsServer(t, 8)
	s.hook = func(n int, _ http.ResponseWriter, r *http.Request) bool {
		if n == 1 {
			hang(r)
			return false
		}
		return true
	}
	p := newTestOpenAI(t, s.srv.URL, func(o *OpenAIOptions) { o.Timeout = 50 * time.Millisecond })
	v, err := p.Embed(context.Background(), "open the drawer")
	if err != nil {
		t.Fatal(err)
	}
	checkVector(t, v, "open the drawer")
	if got := s.calls.Load(); got != 2 {
		t.Fatalf("requests = %d, want 2", got)
	}
}

func TestOpenAIConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close()
	p := newTestOpenAI(t, base, func(o *OpenAIOptions) { o.MaxRetries = 1 })
	_, err := p.Embed(context.Background(), "x")
	if !errors.Is(err, ErrProvider) || !strings.Contains(err.Error(), "gave up after 2 attempts") {
		t.Fatalf("error = %v", err)
	}
}

func TestEndpoint(t *testing.T) {
	tests := []struct {
		base, want string
	}{
		{"https://api.openai.com", "https://api.openai.com/v1/embeddings"},
		{"https://api.openai.com/", "https://api.openai.com/v1/embeddings"},
		{"https://api.openai.com/v1", "https://api.openai.com/v1/embeddings"},
		{"http://localhost:8080/v1/", "http://localhost:8080/v1/embeddings"},
		{"http://gw.lab/proxy/openai", "http://gw.lab/proxy/openai/v1/embeddings"},
		{"ftp://x", ""},
		{"localhost:8080", ""},
		{"http://", ""},
		{"", ""},
	}
	for _, tc := range tests {
		got, err := endpoint(tc.base)
		if tc.want == "" {
			if err == nil {
				t.Errorf("endpoint(%q) = %q, want error", tc.base, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("endpoint(%q) = %q, %v; want %q", tc.base, got, err, tc.want)
		}
	}
}

func TestNewOpenAIValidation(t *testing.T) {
	_, err := NewOpenAI(OpenAIOptions{BaseURL: "gopher://x", BatchSize: -1})
	if err == nil {
		t.Fatal("want error")
	}
	for _, want := range []string{"Model is required", "Dimensions must be in", "BaseURL", "BatchSize"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	p, err := NewOpenAI(OpenAIOptions{Model: "m", Dimensions: 3})
	if err != nil {
		t.Fatal(err)
	}
	if p.url != "https://api.openai.com/v1/embeddings" || p.o.BatchSize != DefaultBatchSize ||
		p.o.MaxRetries != DefaultMaxRetries || p.o.Timeout != DefaultTimeout {
		t.Fatalf("defaults not applied: %+v %s", p.o, p.url)
	}
}

func TestRetryAfterHeader(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0}, {"0", 0}, {"3", 3 * time.Second}, {"-1", 0}, {"soon", 0},
		{"Mon, 02 Jan 2006 15:04:05 GMT", 0}, // in the past
	}
	for _, tc := range tests {
		if got := retryAfterHeader(tc.in); got != tc.want {
			t.Errorf("retryAfterHeader(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestBackoffBounded(t *testing.T) {
	p := &OpenAI{o: OpenAIOptions{RetryBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}}
	for attempt := range 70 {
		for _, ra := range []time.Duration{0, 500 * time.Millisecond, time.Hour} {
			d := p.backoff(attempt, ra)
			if d < 0 || d > time.Second {
				t.Fatalf("backoff(%d, %v) = %v, outside [0, 1s]", attempt, ra, d)
			}
			if ra == 500*time.Millisecond && d < ra {
				t.Fatalf("backoff(%d, %v) = %v, below Retry-After", attempt, ra, d)
			}
		}
	}
}

func TestBodySnippet(t *testing.T) {
	long := strings.Repeat("x", 1000)
	if got := bodySnippet([]byte(long)); len([]rune(got)) != 301 || !strings.HasSuffix(got, "…") {
		t.Fatalf("long snippet = %d runes", len([]rune(got)))
	}
	if got := bodySnippet(nil); got != "(empty body)" {
		t.Fatalf("empty snippet = %q", got)
	}
	if got := bodySnippet([]byte("a\n\n  b\xff")); got != "a b\uFFFD" {
		t.Fatalf("snippet = %q", got)
	}
}
