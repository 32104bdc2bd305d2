package client

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/ctxgraph/ctxgraph/rlds"
)

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// LineError is a bad line of a JSONL file.
type LineError struct {
	File string
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// ReadJSONL calls fn with each wire message of a JSONL file, in order.
// A line that is not a valid message is reported to bad (and skipped);
// blank lines are ignored.
func ReadJSONL(path string, fn func(*rlds.Message) error, bad func(*LineError)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return readJSONL(f, path, fn, bad)
}

func readJSONL(r io.Reader, name string, fn func(*rlds.Message) error, bad func(*LineError)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		m, err := rlds.DecodeMessage(b)
		if err != nil {
			bad(&LineError{File: name, Line: line, Err: err})
			continue
		}
		if err := fn(m); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: line %d: %w", name, line+1, err)
	}
	return nil
}
