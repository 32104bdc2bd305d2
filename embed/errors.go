package embed

import "errors"

// Errors returned by this package are wrapped with context (the batch
// index, the HTTP status, the lengths involved); check them with
// [errors.Is].
var (
	// ErrEmptyText is returned for a text with nothing to embed: empty,
	// only whitespace, or (for [Hashing]) no letters or digits at all.
	ErrEmptyText = errors.New("embed: empty text")
	// ErrDimension is returned when a vector has the wrong length: an
	// input to [Projection.Project], or a provider's response.
	ErrDimension = errors.New("embed: wrong dimension")
	// ErrInvalid is returned for NaN or ±Inf values in an input vector.
	ErrInvalid = errors.New("embed: invalid value")
	// ErrProvider is returned when a remote provider fails: a non-2xx
	// status after retries, an undecodable or inconsistent response, or
	// non-finite values in a returned vector.
	ErrProvider = errors.New("embed: provider error")
)
