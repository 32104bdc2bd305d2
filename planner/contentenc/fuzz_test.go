package contentenc

import (
	"bytes"
	"testing"
)

// FuzzContentCodings feeds outside input to both ends: an
// Accept-Encoding value from a request, and a reply body a client
// decodes. Negotiate names a coding it writes or none, what it names
// round-trips, and Decode of arbitrary bytes fails or stays in bounds.
func FuzzContentCodings(f *testing.F) {
	f.Add("s2", []byte(`{"nodes":[],"edges":[]}`))
	f.Add("gzip, snappy;q=0.5, s2;q=0", []byte{0x80, 0x80, 0x80, 0x80, 0x04})
	f.Add("SNAPPY ; level=1", bytes.Repeat([]byte("abc"), 2000))
	f.Fuzz(func(t *testing.T, accept string, data []byte) {
		coding := Negotiate(accept)
		if coding != "" && coding != S2 && coding != Snappy && coding != Gzip {
			t.Fatalf("Negotiate(%q) = %q, not a coding it writes", accept, coding)
		}
		if coding != "" {
			enc, err := Append(nil, data, coding)
			if err != nil {
				t.Fatal(err)
			}
			dec, err := Decode(nil, enc, coding)
			if err != nil || !bytes.Equal(dec, data) {
				t.Fatalf("%s round trip: %v", coding, err)
			}
		}
		for _, c := range []string{S2, Snappy, Gzip} {
			if out, err := Decode(nil, data, c); err == nil && len(out) > MaxDecodedBytes {
				t.Fatalf("%s: decoded %d bytes past the limit", c, len(out))
			}
		}
	})
}
