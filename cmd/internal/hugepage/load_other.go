//go:build !linux

package hugepage

// ForLoad does nothing off Linux.
func ForLoad(n int64) LoadAdvice {
	return LoadAdvice{Reason: "transparent huge pages are managed only on Linux"}
}
