package cms

import (
	"encoding/json"
	"fmt"
)

// encodeSpan is the storage encoding of a span (its wire JSON).
func encodeSpan(s *Span) ([]byte, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode span %s: %w", s.ID, err)
	}
	return b, nil
}

// DecodeStored decodes a span as the store holds it.
func DecodeStored(b []byte) (*Span, error) {
	var s Span
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%w: stored span: %v", ErrMalformed, err)
	}
	return &s, nil
}
