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

// DecodeStoredText decodes only the id and text of a span as the store
// holds it: what a keyword index needs, without building the span's
// embedding and lists.
func DecodeStoredText(b []byte) (id, text string, err error) {
	var s struct {
		ID   string `json:"id"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return "", "", fmt.Errorf("%w: stored span: %v", ErrMalformed, err)
	}
	return s.ID, s.Text, nil
}
