//go:build !linux

package hugepage

// ForLoad does nothing off Linux.
func ForLoad(n int64) LoadAdvice {
	return LoadAdvice{Reason: "transparent huge pages are managed only on Linux"}
}

// HostReclaimsFree is false off Linux: nothing here reads the host's
// free page reporting.
func HostReclaimsFree() bool { return false }
