package embed

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Provider names accepted by [Options.Provider].
const (
	ProviderHash   = "hash"
	ProviderOpenAI = "openai"
)

// MaxDimensions is the largest vector length [New] accepts.
const MaxDimensions = 1 << 16

// Options selects and configures the [Embedder] that [New] builds.
// Start from [DefaultOptions]; zero fields take the defaults below.
type Options struct {
	// Provider is "hash" (the offline [Hashing] embedder) or "openai"
	// (an OpenAI-compatible HTTP endpoint). Default "hash".
	Provider string
	// Dimensions is the vector length. Default 384 (DefaultDimensions).
	Dimensions int

	// The fields below are used by the openai provider only.

	// BaseURL is the server root; requests go to {BaseURL}/v1/embeddings.
	// Default "https://api.openai.com".
	BaseURL string
	// Model is the embedding model. Required for openai.
	Model string
	// APIKey is the bearer token; empty sends no Authorization header.
	APIKey string
	// Timeout bounds each HTTP attempt. Default 30s.
	Timeout time.Duration
	// BatchSize is the most texts per request. Default 256.
	BatchSize int
}

// DefaultOptions returns the offline default: the hashing provider with
// 384 dimensions (and the openai defaults filled in, should Provider be
// switched).
func DefaultOptions() Options {
	return Options{
		Provider:   ProviderHash,
		Dimensions: DefaultDimensions,
		BaseURL:    DefaultOpenAIBaseURL,
		Timeout:    DefaultTimeout,
		BatchSize:  DefaultBatchSize,
	}
}

func (o *Options) ensureDefaults() {
	o.Provider = strings.ToLower(strings.TrimSpace(o.Provider))
	if o.Provider == "" {
		o.Provider = ProviderHash
	}
	if o.Dimensions == 0 {
		o.Dimensions = DefaultDimensions
	}
	if o.BaseURL == "" {
		o.BaseURL = DefaultOpenAIBaseURL
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
}

// validate reports every problem of o at once.
func (o Options) validate() error {
	var errs []error
	switch o.Provider {
	case ProviderHash, ProviderOpenAI:
	default:
		errs = append(errs, fmt.Errorf("embed: options: unknown Provider %q (want %q or %q)",
			o.Provider, ProviderHash, ProviderOpenAI))
	}
	if err := checkDimensions(o.Dimensions); err != nil {
		errs = append(errs, err)
	}
	if o.Timeout < 0 {
		errs = append(errs, fmt.Errorf("embed: options: Timeout must not be negative, got %v", o.Timeout))
	}
	if o.BatchSize < 0 {
		errs = append(errs, fmt.Errorf("embed: options: BatchSize must not be negative, got %d", o.BatchSize))
	}
	if o.Provider == ProviderOpenAI {
		if strings.TrimSpace(o.Model) == "" {
			errs = append(errs, errors.New("embed: options: Model is required for the openai provider"))
		}
		if _, err := endpoint(o.BaseURL); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func checkDimensions(d int) error {
	if d < 1 || d > MaxDimensions {
		return fmt.Errorf("embed: options: Dimensions must be in [1, %d], got %d", MaxDimensions, d)
	}
	return nil
}

// New validates o, reporting all of its problems together, and builds
// the selected provider. Fields that the selected provider does not use
// are ignored.
func New(o Options) (Embedder, error) {
	o.ensureDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	switch o.Provider {
	case ProviderOpenAI:
		return NewOpenAI(OpenAIOptions{
			BaseURL:    o.BaseURL,
			Model:      o.Model,
			APIKey:     o.APIKey,
			Dimensions: o.Dimensions,
			Timeout:    o.Timeout,
			BatchSize:  o.BatchSize,
		})
	default:
		return NewHashing(o.Dimensions), nil
	}
}
