package embed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Defaults of [OpenAIOptions].
const (
	DefaultOpenAIBaseURL = "https://api.openai.com"
	DefaultTimeout       = 30 * time.Second
	DefaultBatchSize     = 256
	DefaultMaxRetries    = 3
	DefaultRetryBackoff  = 250 * time.Millisecond
	DefaultMaxBackoff    = 10 * time.Second
)

// OpenAIOptions configures an [OpenAI] provider. Zero fields take the
// documented defaults.
type OpenAIOptions struct {
	// BaseURL is the server root; requests go to {BaseURL}/v1/embeddings.
	// A trailing "/" or "/v1" is accepted. Default DefaultOpenAIBaseURL.
	BaseURL string
	// Model is the embedding model name. Required.
	Model string
	// APIKey is sent as "Authorization: Bearer <APIKey>" when set.
	APIKey string
	// Dimensions is the length of the vectors the server must return.
	// Required (>= 1). It is sent as the request's "dimensions" field
	// unless OmitDimensions is set.
	Dimensions int
	// OmitDimensions leaves "dimensions" out of requests, for models of
	// a fixed size that reject the field. Responses are still checked
	// against Dimensions. Default false.
	OmitDimensions bool
	// Timeout bounds each HTTP attempt (not the whole call, which the
	// caller's context bounds). Default 30s.
	Timeout time.Duration
	// BatchSize is the most texts sent in one request; larger batches
	// are split. Default 256.
	BatchSize int
	// MaxRetries is how many times a request is retried after a 408,
	// 429 or 5xx status or a transport error. Default 3; a negative
	// value disables retries.
	MaxRetries int
	// RetryBackoff is the delay before the first retry; it doubles on
	// each further retry, with jitter, and a Retry-After header can
	// lengthen it. Default 250ms.
	RetryBackoff time.Duration
	// MaxBackoff caps any single retry delay. Default 10s.
	MaxBackoff time.Duration
	// HTTPClient sends the requests. Nil uses a new client with
	// http.DefaultTransport.
	HTTPClient *http.Client
}

func (o *OpenAIOptions) ensureDefaults() {
	if o.BaseURL == "" {
		o.BaseURL = DefaultOpenAIBaseURL
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = DefaultMaxRetries
	} else if o.MaxRetries < 0 {
		o.MaxRetries = 0
	}
	if o.RetryBackoff == 0 {
		o.RetryBackoff = DefaultRetryBackoff
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{}
	}
}

func (o OpenAIOptions) validate() error {
	var errs []error
	if strings.TrimSpace(o.Model) == "" {
		errs = append(errs, errors.New("embed: options: Model is required for the openai provider"))
	}
	if err := checkDimensions(o.Dimensions); err != nil {
		errs = append(errs, err)
	}
	if _, err := endpoint(o.BaseURL); err != nil {
		errs = append(errs, err)
	}
	if o.Timeout < 0 {
		errs = append(errs, fmt.Errorf("embed: options: Timeout must not be negative, got %v", o.Timeout))
	}
	if o.BatchSize < 0 {
		errs = append(errs, fmt.Errorf("embed: options: BatchSize must not be negative, got %d", o.BatchSize))
	}
	if o.RetryBackoff < 0 || o.MaxBackoff < 0 {
		errs = append(errs, errors.New("embed: options: RetryBackoff and MaxBackoff must not be negative"))
	}
	return errors.Join(errs...)
}

// endpoint returns the embeddings URL of a base URL.
func endpoint(base string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("embed: options: BaseURL %q is not an http(s) URL", base)
	}
	p := strings.TrimSuffix(strings.TrimRight(u.Path, "/"), "/v1")
	u.Path = p + "/v1/embeddings"
	u.RawPath = ""
	return u.String(), nil
}

// OpenAI is an [Embedder] backed by an OpenAI-compatible HTTP endpoint
// (OpenAI, Azure-style gateways, vLLM, llama.cpp, Ollama, TEI, ...).
//
// Each request is a POST of {"model", "input": [...], "dimensions"} to
// {BaseURL}/v1/embeddings; the response's data items are put back in
// input order by their "index". Every vector is checked for length and
// finiteness and L2-normalised. Requests answered 408, 429 or 5xx, and
// transport failures, are retried with capped exponential backoff;
// other statuses fail at once with the status and a snippet of the body.
//
// An OpenAI is immutable and safe for concurrent use.
type OpenAI struct {
	o   OpenAIOptions
	url string
}

var _ Embedder = (*OpenAI)(nil)

// NewOpenAI validates opts, fills its defaults and returns the provider.
// It does not contact the server.
func NewOpenAI(opts OpenAIOptions) (*OpenAI, error) {
	opts.ensureDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	u, _ := endpoint(opts.BaseURL)
	return &OpenAI{o: opts, url: u}, nil
}

// Dimensions is the length of every vector p returns.
func (p *OpenAI) Dimensions() int { return p.o.Dimensions }

// Embed returns the unit-length vector of text.
func (p *OpenAI) Embed(ctx context.Context, text string) ([]float32, error) {
	vs, err := p.embed(ctx, []string{text}, false)
	if err != nil {
		return nil, err
	}
	return vs[0], nil
}

// EmbedBatch returns one vector per text, in order, sending at most
// BatchSize texts per request. Empty texts are rejected before any
// request is sent; errors name the index of the text at fault.
func (p *OpenAI) EmbedBatch(ctx context.Context, texts []string) ([][]float32, error) {
	return p.embed(ctx, texts, true)
}

func (p *OpenAI) embed(ctx context.Context, texts []string, batch bool) ([][]float32, error) {
	for i, t := range texts {
		if strings.TrimSpace(t) == "" {
			if batch {
				return nil, fmt.Errorf("text %d: %w", i, ErrEmptyText)
			}
			return nil, ErrEmptyText
		}
	}
	out := make([][]float32, 0, len(texts))
	for off := 0; off < len(texts); off += p.o.BatchSize {
		end := min(off+p.o.BatchSize, len(texts))
		vs, err := p.request(ctx, texts[off:end], off)
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
	}
	return out, nil
}

type embeddingRequest struct {
	Model      string   `json:"model"`
	Input      []string `json:"input"`
	Dimensions int      `json:"dimensions,omitempty"`
}

type embeddingResponse struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
}

// request embeds one batch whose first text has index off in the caller's
// slice, retrying transient failures.
func (p *OpenAI) request(ctx context.Context, texts []string, off int) ([][]float32, error) {
	req := embeddingRequest{Model: p.o.Model, Input: texts}
	if !p.o.OmitDimensions {
		req.Dimensions = p.o.Dimensions
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("embed: encode request: %w", err)
	}
	var last error
	for attempt := 0; ; attempt++ {
		vs, retryAfter, err := p.attempt(ctx, body, texts, off)
		if err == nil {
			return vs, nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("embed: openai: %w", cerr)
		}
		if retryAfter < 0 || attempt >= p.o.MaxRetries {
			if retryAfter >= 0 && attempt > 0 {
				return nil, fmt.Errorf("%w (gave up after %d attempts)", err, attempt+1)
			}
			return nil, err
		}
		last = err
		if err := sleep(ctx, p.backoff(attempt, retryAfter)); err != nil {
			return nil, fmt.Errorf("embed: openai: %w (while retrying after: %v)", err, last)
		}
	}
}

// backoff is the delay before retry number attempt+1: RetryBackoff
// doubled per attempt, with "equal jitter", raised to the server's
// Retry-After, capped at MaxBackoff.
func (p *OpenAI) backoff(attempt int, retryAfter time.Duration) time.Duration {
	d := p.o.RetryBackoff << min(attempt, 20)
	if d <= 0 || d > p.o.MaxBackoff {
		d = p.o.MaxBackoff
	}
	if half := int64(d / 2); half > 0 {
		d = time.Duration(half + rand.Int64N(half+1))
	}
	return min(max(d, retryAfter), p.o.MaxBackoff)
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// snippetBytes is how much of an error body is read for the message.
const snippetBytes = 4 << 10

// attempt sends one request. On failure retryAfter is negative when the
// error is permanent, otherwise the server's requested delay (0 if none).
func (p *OpenAI) attempt(ctx context.Context, body []byte, texts []string, off int) (vs [][]float32, retryAfter time.Duration, err error) {
	actx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(actx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return nil, -1, fmt.Errorf("%w: build request: %v", ErrProvider, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set("User-Agent", "ctxgraph-embed/1")
	if p.o.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+p.o.APIKey)
	}
	resp, err := p.o.HTTPClient.Do(hreq)
	if err != nil {
		// Transport failures (refused, reset, per-attempt timeout) are
		// transient; the caller checks the parent context first.
		return nil, 0, fmt.Errorf("%w: POST %s: %w", ErrProvider, p.url, unwrapURLError(err))
	}
	defer resp.Body.Close()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, snippetBytes))
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // allow connection reuse
		err := fmt.Errorf("%w: POST %s: status %d %s: %s", ErrProvider, p.url,
			resp.StatusCode, http.StatusText(resp.StatusCode), bodySnippet(snippet))
		if retryable(resp.StatusCode) {
			return nil, retryAfterHeader(resp.Header.Get("Retry-After")), err
		}
		return nil, -1, err
	}

	// A float in JSON takes at most ~25 bytes; allow generous slack.
	limit := int64(1<<20) + int64(len(texts))*int64(p.o.Dimensions)*32
	var r embeddingResponse
	dec := json.NewDecoder(io.LimitReader(resp.Body, limit))
	if err := dec.Decode(&r); err != nil {
		if actx.Err() != nil && ctx.Err() == nil {
			return nil, 0, fmt.Errorf("%w: POST %s: read response: %w", ErrProvider, p.url, actx.Err())
		}
		return nil, -1, fmt.Errorf("%w: POST %s: decode response (limit %d bytes): %v", ErrProvider, p.url, limit, err)
	}
	vs, err = p.collect(&r, len(texts), off)
	if err != nil {
		return nil, -1, err
	}
	return vs, 0, nil
}

// collect orders, checks and normalises the vectors of one response.
func (p *OpenAI) collect(r *embeddingResponse, n, off int) ([][]float32, error) {
	if len(r.Data) != n {
		return nil, fmt.Errorf("%w: response has %d embeddings for %d inputs", ErrProvider, len(r.Data), n)
	}
	out := make([][]float32, n)
	for _, d := range r.Data {
		if d.Index < 0 || d.Index >= n {
			return nil, fmt.Errorf("%w: response index %d out of range [0, %d)", ErrProvider, d.Index, n)
		}
		if out[d.Index] != nil {
			return nil, fmt.Errorf("%w: response repeats index %d", ErrProvider, d.Index)
		}
		if len(d.Embedding) != p.o.Dimensions {
			return nil, fmt.Errorf("%w: text %d: provider returned %d values, want %d",
				ErrDimension, off+d.Index, len(d.Embedding), p.o.Dimensions)
		}
		if err := normalize32(d.Embedding); err != nil {
			return nil, fmt.Errorf("%w: text %d: %v", ErrProvider, off+d.Index, err)
		}
		out[d.Index] = d.Embedding
	}
	return out, nil
}

// normalize32 scales v in place to unit length, rejecting non-finite
// values and the zero vector.
func normalize32(v []float32) error {
	var ss float64
	for i, x := range v {
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("non-finite value %v at component %d", x, i)
		}
		ss += f * f
	}
	if ss == 0 || math.IsInf(ss, 0) {
		return errors.New("vector has zero or overflowing norm")
	}
	inv := 1 / math.Sqrt(ss)
	for i, x := range v {
		v[i] = float32(float64(x) * inv)
	}
	return nil
}

func retryable(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500
}

// retryAfterHeader parses Retry-After (delta-seconds or an HTTP date).
func retryAfterHeader(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// unwrapURLError drops *url.Error's "Post \"...\":" prefix, which would
// repeat the URL already in the message.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// bodySnippet renders an error body on one line, at most 300 runes.
func bodySnippet(b []byte) string {
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(b), "\uFFFD")), " ")
	if s == "" {
		return "(empty body)"
	}
	return clip(s, 300)
}

// clip shortens s to at most n runes, marking a cut with "…".
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for k := 0; k < n; k++ {
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
	}
	return s[:i] + "…"
}
