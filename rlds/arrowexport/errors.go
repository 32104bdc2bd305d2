package arrowexport

import "errors"

var (
	// ErrInvalid marks export options or a query that make no sense (an
	// unknown table or format, a bad time, a window that ends before it
	// starts). It is wrapped with the reason.
	ErrInvalid = errors.New("arrowexport: invalid export")
	// ErrSchema marks a record batch that does not have the schema of the
	// table it claims to be: a reader was given the wrong file.
	ErrSchema = errors.New("arrowexport: unexpected schema")
)
