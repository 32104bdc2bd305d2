package rlds

import "errors"

var (
	// ErrMalformed marks bytes that are not a wire message at all.
	ErrMalformed = errors.New("rlds: malformed message")
	// ErrInvalid marks a well-formed message whose fields are wrong.
	ErrInvalid = errors.New("rlds: invalid message")
	// ErrNonFinite marks a NaN or infinite number.
	ErrNonFinite = errors.New("rlds: non-finite number")
	// ErrShape marks a tensor whose values do not fill its shape.
	ErrShape = errors.New("rlds: tensor shape mismatch")
	// ErrDType marks an unknown or misused element type.
	ErrDType = errors.New("rlds: bad dtype")
	// ErrCorrupt marks a TFRecord or Example that fails its checks
	// (CRC, length, protobuf structure).
	ErrCorrupt = errors.New("rlds: corrupt record")
)
