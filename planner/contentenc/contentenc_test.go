package contentenc

import (
	"bytes"
	stdgzip "compress/gzip"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/golang/snappy"
)

func TestNegotiate(t *testing.T) {
	for _, c := range []struct {
		accept []string
		want   string
	}{
		{nil, ""},
		{[]string{""}, ""},
		{[]string{"s2"}, S2},
		{[]string{"S2"}, S2},
		{[]string{"snappy, s2"}, Snappy},
		{[]string{"br, gzip;q=0, s2;q=0.5"}, S2},
		{[]string{"gzip, br;q=1, s2;q=0.5"}, Gzip},
		{[]string{"deflate", "snappy"}, Snappy},
		{[]string{"x-gzip"}, Gzip},
		{[]string{"s2;q=0, snappy"}, Snappy},
		{[]string{"s2;q=0.000"}, ""},
		{[]string{"s2; q=0.001"}, S2},
		{[]string{"br, deflate, zstd"}, ""},
		{[]string{"  snappy  ;level=3"}, Snappy},
	} {
		if got := Negotiate(c.accept...); got != c.want {
			t.Errorf("Negotiate(%q) = %q, want %q", c.accept, got, c.want)
		}
	}
}

func answerLike(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	b.WriteString(`{"nodes":[`)
	for b.Len() < n {
		b.WriteString(`{"id":"`)
		for range 12 {
			b.WriteByte("0123456789abcdef"[r.IntN(16)])
		}
		b.WriteString(`","type":"entity","confidence":0.`)
		b.WriteByte('1' + byte(r.IntN(9)))
		b.WriteString(`,"provenance":[{"episode_id":"ep-17","agent":"robot-3"}]},`)
	}
	b.WriteString(`{}]}`)
	return []byte(b.String())
}

func TestAppendDecodeRoundTrip(t *testing.T) {
	src := answerLike(130 << 10)
	for _, coding := range []string{S2, Snappy, Gzip} {
		enc, err := Append(nil, src, coding)
		if err != nil {
			t.Fatal(err)
		}
		if len(enc) >= len(src)/2 {
			t.Errorf("%s: %d bytes of %d: an answer-like body should at least halve", coding, len(enc), len(src))
		}
		dec, err := Decode(nil, enc, coding)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(dec, src) {
			t.Fatalf("%s: round trip changed the body", coding)
		}
		// Buffers with room are reused, not reallocated.
		buf := make([]byte, 0, 1<<20)
		enc2, err := Append(buf, src, coding)
		if err != nil || &enc2[0] != &buf[:1][0] || !bytes.Equal(enc2, enc) {
			t.Errorf("%s: Append into a buffer with room: err %v, reused %v", coding, err, err == nil && &enc2[0] == &buf[:1][0])
		}
	}
	if same, err := Append(nil, src, ""); err != nil || &same[0] != &src[0] {
		t.Errorf("Append with no coding should return the body itself (err %v)", err)
	}
	if same, err := Decode(nil, src, "identity"); err != nil || &same[0] != &src[0] {
		t.Errorf("Decode of identity should return the body itself (err %v)", err)
	}
}

// A Snappy reply is read by a Snappy decoder that knows nothing of s2.
func TestSnappyIsReadBySnappy(t *testing.T) {
	src := answerLike(100 << 10)
	enc, err := Append(nil, src, Snappy)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := snappy.Decode(nil, enc)
	if err != nil || !bytes.Equal(dec, src) {
		t.Fatalf("github.com/golang/snappy could not read the reply: %v", err)
	}
}

func TestDecodeRefuses(t *testing.T) {
	if _, err := Decode(nil, []byte("x"), "br"); !errors.Is(err, ErrUnknownCoding) {
		t.Errorf("br: %v, want ErrUnknownCoding", err)
	}
	if _, err := Decode(nil, []byte("not gzip"), Gzip); err == nil {
		t.Error("a body that is not gzip decoded without error")
	}
	if _, err := Append(nil, []byte("x"), "br"); !errors.Is(err, ErrUnknownCoding) {
		t.Errorf("Append br: %v, want ErrUnknownCoding", err)
	}
	if _, err := Decode(nil, []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2}, S2); err == nil {
		t.Error("a damaged s2 block decoded without error")
	}
	// A header claiming more than MaxDecodedBytes is refused before any
	// allocation: a varint of 1 GiB and nothing after it.
	bomb := []byte{0x80, 0x80, 0x80, 0x80, 0x04}
	if _, err := Decode(nil, bomb, S2); err == nil || !strings.Contains(err.Error(), "inflate") {
		t.Errorf("a 1 GiB claim: %v, want a refusal naming the limit", err)
	}
}

// A gzip reply is read by the standard library's reader, and one that
// inflates past MaxDecodedBytes is refused.
func TestGzip(t *testing.T) {
	src := answerLike(100 << 10)
	enc, err := Append(nil, src, Gzip)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := stdgzip.NewReader(bytes.NewReader(enc))
	if err != nil {
		t.Fatal(err)
	}
	if dec, err := io.ReadAll(zr); err != nil || !bytes.Equal(dec, src) {
		t.Fatalf("compress/gzip could not read the reply: %v", err)
	}
	bomb, err := Append(nil, make([]byte, MaxDecodedBytes+1), Gzip)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(nil, bomb, Gzip); err == nil || !strings.Contains(err.Error(), "inflate") {
		t.Errorf("a reply inflating to %d bytes: %v, want a refusal naming the limit", MaxDecodedBytes+1, err)
	}
}

func BenchmarkAppend(b *testing.B) {
	src := answerLike(130 << 10)
	for _, coding := range []string{S2, Snappy, Gzip} {
		b.Run(coding, func(b *testing.B) {
			dst := make([]byte, 0, 256<<10)
			var n int
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				out, err := Append(dst, src, coding)
				if err != nil {
					b.Fatal(err)
				}
				n = len(out)
			}
			b.ReportMetric(float64(n), "bytes")
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	src := answerLike(130 << 10)
	enc, _ := Append(nil, src, S2)
	dst := make([]byte, 0, 256<<10)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, err := Decode(dst, enc, S2); err != nil {
			b.Fatal(err)
		}
	}
}
