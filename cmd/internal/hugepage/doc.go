// Package hugepage backs the daemon's heap with transparent huge pages.
//
// The planner's fast path reads a few kilobytes at random addresses of a
// heap of gigabytes (the view's maps, the index's lists, candidate
// embeddings). With 4 KiB pages nearly every such read misses the TLB,
// and under virtualisation a miss walks two sets of page tables. With
// 2 MiB pages the heap of a medium store needs about a thousand TLB
// entries instead of half a million. Measured on the medium bench (see
// BENCHMARKS.md), the planner's 1-hop p99 falls by about a third.
//
// Linux gives huge pages to anonymous memory either always or, in the
// common "madvise" mode, only where a program asks (MADV_HUGEPAGE); the
// Go runtime does not ask for its heap. A [Keeper] asks: it finds the
// process's large private anonymous mappings in /proc/self/maps, marks
// them MADV_HUGEPAGE (later faults there get huge pages) and collapses
// what is already resident, 2 MiB at a time (MADV_COLLAPSE, Linux 6.1+).
// A collapse copies the pages, so the keeper runs on its own OS thread
// at the lowest CPU priority, and each pass only visits ranges it has
// not collapsed before. Where the kernel cannot (another OS, THP
// disabled, an old kernel) it reports so once and stops.
package hugepage
