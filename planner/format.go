package planner

import "slices"

// formatters render an answer in a format other than JSON; the key is
// the request's format name.
var formatters = map[string]func(*Answer) ([]byte, string, error){}

// Render returns the answer in format (json when empty) and its media type.
func Render(a *Answer, format string) ([]byte, string, error) {
	if f, ok := formatters[format]; ok {
		return f(a)
	}
	b, err := jsonMarshal(a)
	return b, "application/json", err
}

func jsonMarshal(a *Answer) ([]byte, error) { return a.AppendJSON(nil) }

// Formats lists the answer formats Render knows.
func Formats() []string {
	out := []string{"json"}
	for f := range formatters {
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}
