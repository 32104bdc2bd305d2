// Package hugepage backs the daemon's heap with transparent huge pages.
//
// The planner's fast path reads a few kilobytes at random addresses of a
// heap of gigabytes (the view's maps, the index's lists, candidate
// embeddings). With 4 KiB pages nearly every such read misses the TLB,
// and under virtualisation a miss walks two sets of page tables. With
// 2 MiB pages the heap of a medium store needs about a thousand TLB
// entries instead of half a million. Measured on the medium bench (see
// BENCHMARKS.md), huge pages lower the planner's p99 by 10-16% on
// average, with wide run-to-run spread.
//
// Linux gives huge pages to anonymous memory either always or, in the
// common "madvise" mode, only where a program asks (MADV_HUGEPAGE); the
// Go runtime does not ask for its heap. A [Keeper] asks. Every 20 ms it
// looks in /proc/self/maps for large private anonymous mappings it has
// not marked and marks them MADV_HUGEPAGE: the runtime maps its heap in
// 64 MiB arenas and fills them as it allocates, so the pages of a
// mapping marked soon after it appears fault in as huge pages, at no
// cost. Every 30 s, on an OS thread of its own at the lowest CPU
// priority, it collapses what was resident before (MADV_COLLAPSE, Linux
// 6.1+: a copy of 2 MiB each), skipping what it collapsed before. Where
// the kernel cannot (another OS, THP disabled, an old kernel) Run says
// so and stops.
//
// Marked memory faults in 2 MiB at a time, each page zeroed whole, and a
// heap that grows under ingest then holds its writer up: on the medium
// bench the visibility p99 was worse in seven pairs of runs of eight
// (BENCHMARKS.md, thirty-eighth round). With [Options.Quiet] a keeper
// marks nothing and collapses only while Quiet reports the process at
// rest (the daemon: no ingest batch applied for 2 s and no planner call
// begun for 1 s), stopping a pass when it no longer is: a store loaded
// or ingested is collapsed once the load is over, and ingest never
// waits on it. Nor do the daemon's readers, as far as it can see to it:
// a collapse stalls, for milliseconds on a VM, every thread that
// touches the range it moves or faults a page meanwhile (BENCHMARKS.md,
// forty-first round).
//
// A start is the exception: it loads gigabytes at once, before anything
// is served, and [ForLoad] marks the heap that load is about to fill,
// when the kernel has free 2 MiB blocks enough for it (BENCHMARKS.md,
// fifty-third round); where the host takes the guest's free memory back
// ([HostReclaimsFree]: there a 2 MiB page of it faults in slower than
// 4 KiB ones) it faults that heap in ahead, in 4 KiB pages, with
// MADV_POPULATE_WRITE: the heap's lowest pages that are not resident,
// where the load allocates first (seventy-fifth and seventy-seventh
// rounds).
package hugepage
