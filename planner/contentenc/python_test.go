package contentenc

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// pyReader reads length-prefixed bodies from stdin, a Snappy block then
// a gzip stream, and prints the SHA-256 of each as decoded by Python's
// own libraries (python-snappy over libsnappy; the standard gzip).
const pyReader = `
import gzip, hashlib, struct, sys
import snappy
data = sys.stdin.buffer.read()
bodies = []
while data:
    (n,) = struct.unpack(">I", data[:4])
    bodies.append(data[4:4 + n])
    data = data[4 + n:]
print(hashlib.sha256(snappy.uncompress(bodies[0])).hexdigest())
print(hashlib.sha256(gzip.decompress(bodies[1])).hexdigest())
`

// pythonWithSnappy returns a Python interpreter that imports snappy, or "".
func pythonWithSnappy() string {
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import snappy").Run() == nil {
			return p
		}
	}
	return ""
}

// The README says a Python client reads the snappy and gzip codings
// with its usual libraries: python-snappy (libsnappy, not s2) and the
// standard gzip. Without python3-snappy the test skips, unless
// CTXGRAPH_REQUIRE_PYSNAPPY is set (make test and CI install it and set
// it), when it fails.
func TestPythonReadsSnappyAndGzip(t *testing.T) {
	py := pythonWithSnappy()
	if py == "" {
		if os.Getenv("CTXGRAPH_REQUIRE_PYSNAPPY") != "" {
			t.Fatal("python-snappy is required (CTXGRAPH_REQUIRE_PYSNAPPY is set) but no python3 imports it: apt-get install python3-snappy")
		}
		t.Skip("python3-snappy is not installed (apt-get install python3-snappy; make test does it)")
	}
	src := answerLike(130 << 10)
	var in bytes.Buffer
	for _, coding := range []string{Snappy, Gzip} {
		enc, err := Append(nil, src, coding)
		if err != nil {
			t.Fatal(err)
		}
		in.Write(binary.BigEndian.AppendUint32(nil, uint32(len(enc))))
		in.Write(enc)
	}
	cmd := exec.Command(py, "-c", pyReader)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, stderr.String())
	}
	sum := sha256.Sum256(src)
	want := hex.EncodeToString(sum[:])
	got := strings.Fields(string(out))
	if len(got) != 2 || got[0] != want || got[1] != want {
		t.Fatalf("python decoded %q, want %s twice", got, want)
	}
}
