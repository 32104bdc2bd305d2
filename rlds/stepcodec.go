package rlds

import (
	"encoding/json"
	"fmt"
)

// stepFormatV1 tags the storage encoding of a step: the wire JSON with
// image and byte tensors replaced by blob references.
const stepFormatV1 byte = 1

// EncodeStep encodes a step for storage.
func EncodeStep(s *Step) ([]byte, error) {
	js, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode step %d: %w", s.Index, err)
	}
	return append([]byte{stepFormatV1}, js...), nil
}

// DecodeStep decodes a stored step.
func DecodeStep(b []byte) (*Step, error) {
	if len(b) == 0 || b[0] != stepFormatV1 {
		return nil, fmt.Errorf("%w: step format", ErrCorrupt)
	}
	var s Step
	if err := json.Unmarshal(b[1:], &s); err != nil {
		return nil, fmt.Errorf("%w: step: %v", ErrCorrupt, err)
	}
	return &s, nil
}
