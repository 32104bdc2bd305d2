//go:build !unix

package daemon

// lockData does nothing here: the stores' own locks guard the directory.
func lockData(string) (release func(), err error) { return func() {}, nil }
