package wave

import "errors"

var (
	// ErrDimension is returned when a vector's length differs from the
	// index dimension. It is wrapped with the lengths.
	ErrDimension = errors.New("wave: wrong vector dimension")
	// ErrNonFinite is returned when a vector holds NaN or ±Inf.
	ErrNonFinite = errors.New("wave: non-finite vector component")
	// ErrCorrupt marks an undecodable or truncated index snapshot.
	ErrCorrupt = errors.New("wave: corrupt snapshot")
)
