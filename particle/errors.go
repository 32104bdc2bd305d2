package particle

import "errors"

var (
	// ErrNotFound is returned when a node, edge, episode or record does
	// not exist. It is wrapped with the id; check with errors.Is.
	ErrNotFound = errors.New("particle: not found")
	// ErrClosed is returned by every method after Close.
	ErrClosed = errors.New("particle: closed")
	// ErrCorrupt marks undecodable keys or values.
	ErrCorrupt = errors.New("particle: corrupt data")
	// ErrInvalid marks a write whose fields break the data model.
	ErrInvalid = errors.New("particle: invalid record")
	// ErrTooBig is returned when one batch does not fit one transaction;
	// the caller splits it.
	ErrTooBig = errors.New("particle: batch too big for one transaction")
	// ErrStorage wraps a failure of the underlying store (disk full, I/O).
	ErrStorage = errors.New("particle: storage error")
)
