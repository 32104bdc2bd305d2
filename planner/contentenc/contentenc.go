// Package contentenc compresses planner answers for the wire the way
// HTTP's content codings do. A requester names the codings it reads in
// an Accept-Encoding header ("s2", or "snappy, s2"; over HTTP, or in
// the headers of a NATS request); the daemon writes an answer of
// MinBytes or more in the first of them it knows and names it in the
// reply's Content-Encoding header. A reply without that header is the
// answer as it is, so a requester that asks and a daemon that does not
// compress still understand each other.
//
// A JSON answer of a 2-hop, 256-item fleet query is about 130 KB, and
// s2 writes it in about 36 KB in 50–120 µs here (BenchmarkAppend, and
// planner's BenchmarkAnswerJSONFleet/append-s2-each). Under
// 64 KB it fits the NATS server's and nats.go's read buffers whole;
// over it both read loops reassemble it in a buffer allocated for it,
// and on a fresh heap each such buffer's pages are faulted in one by
// one (BENCHMARKS.md, the thirty-fifth and sixty-ninth rounds).
package contentenc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
)

// Header names, as HTTP spells them.
const (
	AcceptHeader  = "Accept-Encoding"
	ContentHeader = "Content-Encoding"
)

// The codings this package writes and reads.
const (
	// S2 is the S2 block format (github.com/klauspost/compress/s2):
	// the fastest here, read by s2.Decode.
	S2 = "s2"
	// Snappy is the Snappy block format, written by s2's Snappy
	// encoder: any Snappy block decoder reads it (python-snappy's
	// uncompress, snappy-java, libsnappy).
	Snappy = "snappy"
	// Gzip is gzip (RFC 1952), written at its fastest level: what HTTP
	// clients ask for by default (Go's, Python's requests, curl
	// --compressed). It takes about six times s2's CPU for a quarter
	// fewer bytes.
	Gzip = "gzip"
)

// MinBytes is the smallest reply worth compressing: below it the bytes
// saved do not pay for the work on both ends.
const MinBytes = 4 << 10

// MaxDecodedBytes bounds what Decode will inflate a reply to.
const MaxDecodedBytes = 64 << 20

// ErrUnknownCoding is returned for a Content-Encoding this package
// does not read.
var ErrUnknownCoding = errors.New("unknown content coding")

// Negotiate returns the coding to answer in, given the Accept-Encoding
// values of a request: the first coding named that this package
// writes, in the order named. Names are compared without regard to
// case; parameters after ';' are ignored, except that "q=0" refuses a
// coding. It returns "" (the answer as it is) when none is known.
func Negotiate(accept ...string) string {
	for _, v := range accept {
		for len(v) > 0 {
			var item string
			item, v, _ = strings.Cut(v, ",")
			name, params, _ := strings.Cut(item, ";")
			name = strings.TrimSpace(name)
			if refused(params) {
				continue
			}
			switch {
			case strings.EqualFold(name, S2):
				return S2
			case strings.EqualFold(name, Snappy):
				return Snappy
			case strings.EqualFold(name, Gzip), strings.EqualFold(name, "x-gzip"):
				return Gzip
			}
		}
	}
	return ""
}

// refused reports whether params (after a coding's ';') give it q=0.
func refused(params string) bool {
	for len(params) > 0 {
		var p string
		p, params, _ = strings.Cut(params, ";")
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		v = strings.TrimRight(strings.TrimSpace(v), "0")
		return v == "0" || v == "0." || v == ""
	}
	return false
}

// Append appends src written in coding to dst[:0]'s array when it has
// room (dst is reused across replies) and returns the result. A coding
// of "" returns src itself.
func Append(dst, src []byte, coding string) ([]byte, error) {
	switch coding {
	case "":
		return src, nil
	case S2, Snappy:
		if n := s2.MaxEncodedLen(len(src)); n < 0 {
			return nil, fmt.Errorf("%s: %d bytes is too large to encode", coding, len(src))
		} else if cap(dst) < n {
			dst = make([]byte, n)
		}
		if coding == S2 {
			return s2.Encode(dst[:cap(dst)], src), nil
		}
		return s2.EncodeSnappy(dst[:cap(dst)], src), nil
	case Gzip:
		zw := gzipWriters.Get().(*gzip.Writer)
		defer func() {
			zw.Reset(io.Discard) // let go of dst while pooled
			gzipWriters.Put(zw)
		}()
		out := bytes.NewBuffer(dst[:0])
		zw.Reset(out)
		if _, err := zw.Write(src); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		if err := zw.Close(); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return out.Bytes(), nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownCoding, coding)
}

// gzipWriters holds gzip writers between replies: each holds its
// compressor's tables and buffers, which would otherwise be allocated
// for every reply.
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	return zw
}}

// Decode returns src as written before coding, in dst's array when it
// has room. A coding of "" (a reply without Content-Encoding) or
// "identity" returns src itself. It refuses a reply that would inflate
// past MaxDecodedBytes.
func Decode(dst, src []byte, coding string) ([]byte, error) {
	switch {
	case coding == "" || strings.EqualFold(coding, "identity"):
		return src, nil
	case strings.EqualFold(coding, S2), strings.EqualFold(coding, Snappy):
		n, err := s2.DecodedLen(src)
		if err != nil {
			return nil, fmt.Errorf("%s reply: %w", coding, err)
		}
		if n > MaxDecodedBytes {
			return nil, fmt.Errorf("%s reply: it would inflate to %d bytes (limit %d)", coding, n, MaxDecodedBytes)
		}
		if cap(dst) < n {
			dst = make([]byte, n)
		}
		out, err := s2.Decode(dst[:cap(dst)], src)
		if err != nil {
			return nil, fmt.Errorf("%s reply: %w", coding, err)
		}
		return out, nil
	case strings.EqualFold(coding, Gzip), strings.EqualFold(coding, "x-gzip"):
		zr, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, fmt.Errorf("gzip reply: %w", err)
		}
		out := bytes.NewBuffer(dst[:0])
		n, err := out.ReadFrom(io.LimitReader(zr, MaxDecodedBytes+1))
		if err != nil {
			return nil, fmt.Errorf("gzip reply: %w", err)
		}
		if n > MaxDecodedBytes {
			return nil, fmt.Errorf("gzip reply: it would inflate past %d bytes", MaxDecodedBytes)
		}
		return out.Bytes(), nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownCoding, coding)
}
