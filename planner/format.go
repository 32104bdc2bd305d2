package planner

import "slices"

// A formatter appends an answer in its format to b and returns the
// result and the format's media type.
type formatter func(b []byte, a *Answer) ([]byte, string, error)

// formatters are the answer formats by the request's format name.
// json and msgpack append into the caller's buffer; the graph formats
// (triples, cypher, turtle, text) render into their own (rendered).
var formatters = map[string]formatter{
	"json": func(b []byte, a *Answer) ([]byte, string, error) {
		out, err := a.AppendJSON(b)
		return out, "application/json", err
	},
}

// rendered adapts a format that renders into a buffer of its own.
func rendered(render func(*Answer) ([]byte, string, error)) formatter {
	return func(b []byte, a *Answer) ([]byte, string, error) {
		out, ctype, err := render(a)
		if len(b) == 0 {
			return out, ctype, err
		}
		return append(b, out...), ctype, err
	}
}

// Append appends the answer in format (json when empty or unknown) to
// b and returns the result and its media type. A caller that reuses b
// between answers (the daemon's NATS replies) spares the JSON and
// msgpack encodings their allocation.
func Append(b []byte, a *Answer, format string) ([]byte, string, error) {
	f, ok := formatters[format]
	if !ok {
		f = formatters["json"]
	}
	return f(b, a)
}

// Render returns the answer in format (json when empty) and its media type.
func Render(a *Answer, format string) ([]byte, string, error) { return Append(nil, a, format) }

// Formats lists the answer formats Render knows.
func Formats() []string {
	out := make([]string, 0, len(formatters))
	for f := range formatters {
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}
