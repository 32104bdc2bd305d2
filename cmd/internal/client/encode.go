package client

import (
	"fmt"

	"github.com/ctxgraph/ctxgraph/rlds"
)

// encodeWithin encodes m and hands it to send, halving a steps message
// that encodes larger than maxBytes until each part fits. A message
// that cannot be halved and is still too large is a *tooLargeError
// (wrapping ErrTooLarge) that holds it.
func encodeWithin(m *rlds.Message, maxBytes int, encode func(*rlds.Message) ([]byte, error), send func(*rlds.Message, []byte) error) error {
	body, err := encode(m)
	if err != nil {
		return err
	}
	if maxBytes > 0 && len(body) > maxBytes {
		if a, b, ok := m.SplitSteps(); ok {
			if err := encodeWithin(a, maxBytes, encode, send); err != nil {
				return err
			}
			return encodeWithin(b, maxBytes, encode, send)
		}
		return &tooLargeError{msg: m, size: len(body), limit: maxBytes}
	}
	return send(m, body)
}

// tooLargeError is a message over the size limit that cannot be halved.
type tooLargeError struct {
	msg         *rlds.Message
	size, limit int
}

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("%v: the %s message is %d bytes, over the limit of %d (the NATS server's max_payload or the daemon's ingest.max_message_bytes)",
		ErrTooLarge, e.msg.Kind, e.size, e.limit)
}

func (e *tooLargeError) Unwrap() error { return ErrTooLarge }
