package wave

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"unsafe"
)

// ivfSearcher is a search's scratch, pooled.
type ivfSearcher struct {
	scores []float32    // list scores by list
	keys   []uint64     // every list's sort key (listKey), those in order first
	order  []Hit        // the lists in probe order (ID = list), as far as ordered
	heap   topK         // the best candidates by 4-bit score; ID = ref index<<32 | position
	best   topK         // the k best of them (scores only)
	gains  topK         // while asks are deferred, the keep best scores taken
	refs   []*listData  // the lists' data as probed, by probe order
	q16    []int16      // the query, quantised for ranking the lists
	q8     []int8       // the query, quantised for scoring the entries' codes
	asks   []ivfAsk     // candidates hinted, Allow not asked yet
	pend   []ivfAsk     // the first-scanned lists' candidates, asked about best first
	cands  []rerankCand // the heap in the order rerank takes it
	scored []rankedHit  // rerank's candidates scored, best first
	taken  []rankedHit  // the best of them admitted
	// cur is the list being scanned and next the one after it, each
	// with its blocks' visit masks (prefetchAdmitted) when read ahead.
	cur, next           *listData
	curMasks, nextMasks []uint32
}

// ivfAsk is a candidate awaiting Allow's answer (Filter.Hint): its heap
// entry, its id and the list (in probe order) it came from.
type ivfAsk struct {
	ref   uint64
	score float32
	id    uint64
	li    int
}

// ivfHintBatch is how many candidates a search hints (Filter.Hint)
// before it asks Allow about them.
const ivfHintBatch = 16

// Items a search wants to have seen, per result-heap slot, before it
// stops probing lists beyond NProbe: admitted ones (estimated) to stop on
// their count, scored ones to stop on the bound their largest residual
// score sets.
const ivfSeenPerSlot = 8

// reachThinning: under Meta fields that admit few of a list's entries,
// the bound's reach samples each list's first block until it has seen
// ivfSeenPerSlot items per heap slot, then one list in reachThinning:
// enough for it to keep growing with the lists scanned, for a quarter of
// the cost in a search the bound cannot stop early (a filter so
// selective that every list is probed).
const reachThinning = 4

// Search returns up to k live vectors admitted by f, highest cosine
// similarity first. A query of the wrong dimension or k <= 0 returns nil.
//
// It probes the lists nearest q, keeping the max(4k, 40) best by
// 4-bit score among the items f admits; f's Meta fields are checked
// before scoring (blocks of 16 entries at once where their summary
// rules out the window, the agent or the site), f.Allow only for an
// item that would enter that heap (with f.Hint, such items are hinted
// 16 at a time, then asked about in order). Once f.Allow has admitted
// at least 90% of the first 32 it was asked about, most items enter the
// heap unasked, and those still in it at the end are asked about then,
// best first by exact score, until k are admitted (see deferAfter). In
// order of list distance,
// it probes an eighth of the NProbe nearest lists (boundFrom), then
// the rest of them until the second condition below holds, then on
// past NProbe (up to every list: exact) until either holds:
//
//   - The heap is full, the items seen are estimated to include 8
//     admitted ones per heap slot and (under a filter) none of the last
//     max(4, NProbe/4) lists improved the heap. The estimate extrapolates
//     Allow's answers about heap candidates, which overrates a filter
//     that favours items near q; the last condition covers that case.
//   - The lists left cannot hold a better item than the k-th best
//     candidate: an item's score is its list's score plus its
//     residual's, a list later in the order scores no higher than the
//     last one probed, and that score plus the largest residual score
//     among the items scored so far (at least 8 per heap slot, so that
//     the largest is a fair estimate) is below the k-th best. Under
//     Meta fields that admit few of a list's entries, its first 16 are
//     scored for that estimate too, admitted or not (in every list
//     until 8 per slot are seen, then in one list of 4), so that it
//     grows with the lists probed however few items the fields admit.
//     A broad filter fills the top k early and stops here, before the
//     first condition would. In a split's catch-alls' index, searched
//     after a key's lists, that largest residual score is raised by half
//     its extrapolation to the items not scored (reachStats.beyond).
//
// The heap is rescored with the float32 vectors, best bound first, as
// far as a candidate left may still rank (ivfSearcher.rerank).
//
// Split by agent ([IVF.SplitByAgent]) and ready, a search whose filter
// names one agent scans that agent's list whole into the heap and then
// probes the catch-alls' index as above, at least 8 lists, waiting for
// as many lists as it probed without a gain (ivf_side.go). Split by time
// ([IVF.SplitByTime]) and ready, a search under a time window (and no
// one agent) does the same with the lists of the hours the window
// overlaps, when they hold at most timeScanFactor times the items an
// unfiltered search scores.
func (x *IVF) Search(q []float32, k int, f *Filter) []Hit {
	if k <= 0 || len(q) != x.dim {
		return nil
	}
	var stats *SearchStats
	if f != nil {
		stats = f.Stats
	}
	if f.isZero() {
		f = nil
	}
	if f != nil {
		if sd := x.sides[byAgent].Load(); sd != nil && oneAgent(f.Agent) && sd.ready.Load() {
			return x.searchAgent(sd, q, k, f, stats)
		}
		if sd := x.sides[byTime].Load(); sd != nil && (f.From != 0 || f.To != 0) && sd.ready.Load() {
			if hits, ok := x.searchTime(sd, q, k, f, stats); ok {
				return hits
			}
		}
	}
	return x.search(q, k, f, nil, int(x.nprobe.Load()), 0, stats)
}

// search is Search over x's lists probing nprobe of them at least, with
// the lists pre (if any), whose codes are of whole vectors, scanned whole
// first; with pre, live is about how many items x holds (its bound's
// reach is extrapolated to those unseen). It adds what it did to stats,
// if not nil.
//
// It may put candidates in the heap before Allow is asked about them
// (deferAsks); should Allow then refuse so many that fewer than k are
// left, the search is made again asking as it goes.
func (x *IVF) search(q []float32, k int, f *Filter, pre []*listData, nprobe, live int, stats *SearchStats) []Hit {
	hits, short := x.searchAsking(q, k, f, pre, nprobe, live, stats, true)
	if short {
		hits, _ = x.searchAsking(q, k, f, pre, nprobe, live, stats, false)
	}
	return hits
}

// Deferred asks: once Allow has been asked about deferAfter candidates
// and admitted at least deferShare of them, a search puts the rest in
// its heap unasked, but for one in deferSample, which it still asks
// about as it comes; should those answers take the share admitted
// below deferShare, it asks as it goes again. The heap has room for as
// many more than it keeps as the first answers say Allow may refuse.
// At the end it asks about the unasked candidates still in the heap,
// once rescored, best first, until k are admitted (ivfSearcher.rerank).
// Asked as it enters the heap, a candidate costs a read of its record
// at a random address, about 0.36 µs on the medium bench's store (a fit
// of 1,000 calls' prefilter times to their lists, items scored and
// asks); far and selective searches put 300–650 candidates through a
// heap of 80 as list after list improves it, while the planner's
// predicate admits 93–96% of what the index's Meta fields let through
// (BENCHMARKS.md, seventy-second round).
const (
	deferAfter  = 32
	deferShare  = 0.9
	deferSample = 8
)

// unasked marks a heap entry's ref whose candidate Allow has not been
// asked about yet (deferred asks); refs are list<<32 | position, far
// below it.
const unasked = 1 << 63

// searchAsking is search, with deferred asks allowed or not; short
// reports that, having deferred them, it found fewer than k admitted
// candidates.
func (x *IVF) searchAsking(q []float32, k int, f *Filter, pre []*listData, nprobe, live int, stats *SearchStats, deferAsks bool) (hits []Hit, short bool) {
	st := x.st.Load()
	s := x.pool.Get().(*ivfSearcher)
	defer x.pool.Put(s)
	keep := max(4*k, 40)
	s.heap = topK{k: keep, h: s.heap.h[:0]}
	s.refs = s.refs[:0]
	s.cur, s.next = nil, nil

	// The lists' centroids' int8 codes are scored against the query
	// quantised to int16: exact integer dot products, twice as fast as
	// converting the codes to float32 (past maxQ16Dim the float32 query
	// and centroids serve). The entries' 4-bit codes are scored against
	// the query quantised to int8.
	s.q16 = slices.Grow(s.q16[:0], x.dim)[:x.dim]
	qs, q16ok := quantizeQuery(q, s.q16)
	q16 := s.q16
	cb := nibbleBytes(x.dim)
	s.q8 = slices.Grow(s.q8[:0], 2*cb)[:2*cb]
	qs8, qsum := quantizeQuery8(q, s.q8)
	q8 := s.q8

	nl := len(st.lists)
	nprobe = min(nprobe, nl)
	s.scores = s.scores[:0]
	s.keys = s.keys[:0]
	for i := range nl {
		sc := float32(0)
		switch c := st.q; {
		case c == nil:
		case q16ok:
			o := i * x.dim
			sc = c.leafScales[i] * qs * float32(dotQ16(q16, c.leafCodes[o:o+x.dim:o+x.dim]))
		default:
			sc = dot(q, c.leaf(i))
		}
		s.scores = append(s.scores, sc)
		s.keys = append(s.keys, listKey(sc, i))
	}
	// The nprobe nearest lists first; more of them in order only if
	// needed, four times as many at each step.
	order := s.nextLists(s.order[:0], nprobe)

	metaFree := f.metaFree()
	var mc metaCheck
	var allow func(uint64) bool
	var hint func(uint64)
	if f != nil {
		allow = f.Allow
		mc = compileMeta(f)
		if allow != nil {
			hint = f.Hint
		}
	}
	blockwise := f != nil && mc.blockwise()
	var passed, asked, allowed int
	// Under Meta fields, which may admit few of a list's entries, a
	// list of which they admit fewer than a block's worth has its first
	// block's entries scored for the bound's reach, admitted or not
	// (sampled counts those not; past the sample's first ivfSeenPerSlot
	// per slot, one such list in reachThinning): the reach's sample then
	// grows with the lists scanned, as it does unfiltered, and the bound
	// can rule out the lists left as soon.
	var sampled int
	// samples reports whether list li (in probe order) would add its
	// first block to the reach's sample.
	samples := func(li int) bool {
		return !metaFree && (passed+sampled < ivfSeenPerSlot*keep || li%reachThinning == 0)
	}
	// lastGain is the last list that put a candidate in the heap: probing
	// past NProbe goes on while recent lists still do.
	lastGain := 0
	patience := max(4, nprobe/4)
	if len(pre) > 0 {
		// The lists scanned first fill the heap with near items, which
		// a later list then rarely improves: wait longer for one.
		patience = max(patience, nprobe)
	}
	enough := func(li int) bool {
		if len(s.heap.h) < keep {
			return false
		}
		est := passed
		if asked > 0 {
			est = passed * allowed / asked
		}
		return est >= ivfSeenPerSlot*keep && (f == nil || li-lastGain > patience)
	}
	// reach is the largest residual score of an item scored so far (its
	// score less its list's), and rs the residual scores' moments
	// (reachStats); best holds the boundK best scores of candidates.
	reach := float32(math.Inf(-1))
	var rs reachStats
	extrapolate := len(pre) > 0 // (reachBeyondShare)
	bk := max(k, boundK)
	s.best = topK{k: bk, h: s.best.h[:0]}
	bounded := func(li int) bool {
		if len(s.best.h) < bk || passed+sampled < ivfSeenPerSlot*keep {
			return false
		}
		r := reach
		if extrapolate {
			r += reachBeyondShare * rs.beyond(live)
		}
		return order[li-1].Score+r < s.best.h[0].Score
	}
	// deferring: candidates enter the heap unasked (deferAfter), but
	// for one in deferSample, asked as it comes, until Allow's answers
	// so far fall below deferShare. The heap then has room for keep and
	// as many more as Allow may refuse; a gain is then a candidate among
	// the keep best taken (s.gains), as it is one among the keep
	// admitted asking as it goes.
	deferring, deferred := false, 0
	take := func(ref uint64, sc float32, li int) {
		s.heap.push(ref, sc)
		s.best.push(0, sc)
		if !deferring || s.gains.enters(sc) {
			lastGain = li
		}
	}
	// ask puts a candidate that passed Allow in the heap; with a Hint,
	// candidates wait in s.asks and are asked in order, each against the
	// heap as it then stands, exactly as if asked at once: what waits
	// was checked against a heap without the waiting ones, which can
	// only let more through, and is checked again here.
	asks := s.asks[:0]
	ask := func(ref uint64, sc float32, id uint64, li int) {
		if len(s.heap.h) == s.heap.k && sc <= s.heap.h[0].Score {
			return
		}
		asked++
		if allow(id) {
			allowed++
			take(ref, sc, li)
		}
		switch admits := float64(allowed) >= deferShare*float64(asked); {
		case deferAsks && !deferring && asked == deferAfter && admits:
			deferring = true
			s.gains = topK{k: keep, h: append(s.gains.h[:0], s.heap.h...)}
			refused := float64(asked-allowed) / float64(asked)
			s.heap.k = keep + 2 + int(math.Ceil(2*refused*float64(keep)))
		case deferring && !admits:
			deferring, deferAsks = false, false // for good
		}
	}
	flush := func() {
		for _, a := range asks {
			ask(a.ref, a.score, a.id, a.li)
		}
		asks = asks[:0]
	}
	// offer puts a candidate that may enter the heap to Allow, hinted
	// and batched (Filter.Hint), asked at once, or takes it (no Allow);
	// while deferring, takes it unasked or samples it.
	offer := func(a ivfAsk) {
		if deferring {
			if deferred++; deferred%deferSample != 0 {
				take(a.ref|unasked, a.score, a.li)
				return
			}
		}
		switch {
		case hint != nil:
			hint(a.id)
			asks = append(asks, a)
			// The deferAfter-th ask ends a batch, and a sample is asked
			// at once, so that the asks deferred are those a search
			// without Hint defers.
			if len(asks) == ivfHintBatch || deferring || deferAsks && asked+len(asks) == deferAfter {
				flush()
			}
		case allow != nil:
			ask(a.ref, a.score, a.id, a.li)
		default:
			take(a.ref, a.score, a.li)
		}
	}
	// pend collects the candidates of the lists scanned first (pre),
	// which are asked about best first afterwards.
	pend, collect := s.pend[:0], false
	// scan visits list d's entries (li its place in the probe order),
	// whose scores are base plus their codes', residual telling whether
	// those are of residuals (reach) or of whole vectors.
	scan := func(d *listData, base float32, li int, residual bool) {
		ref := uint64(len(s.refs)) << 32
		s.refs = append(s.refs, d)
		n := d.len()
		codes := d.codes[:n*cb]
		// The summaries' verdicts read ahead, if this list's were (an
		// entry published since is judged by a summary that may not
		// cover it yet: the search may miss an item added during it).
		var visits []uint32
		if d == s.cur {
			visits = s.curMasks
		}
		residualScore := func(i int) float32 {
			o := i * cb
			return d.steps[i]*qs8*float32(dotU4(q8, codes[o:o+cb:o+cb])) + d.lows[i]*qsum
		}
		// visible is the entries of block b to visit, one bit each: its
		// published live ones, less those its summary rules out.
		visible := func(b int) uint32 {
			mask := d.liveMask(b, n)
			if bi := b >> blockShift; bi < len(visits) {
				mask &= visits[bi]
			} else if blockwise {
				mask &= mc.visit(&d.blk[bi])
			}
			return mask
		}
		before := passed
		// admitted is the entries of block b that the Meta fields admit
		// (none past the list's end).
		admitted := func(b int) uint32 {
			if b >= n {
				return 0
			}
			mask := visible(b)
			if !metaFree {
				for m := mask; m != 0; m &= m - 1 {
					if j := bits.TrailingZeros32(m); !mc.admits(&d.metas[b+j]) {
						mask &^= 1 << j
					}
				}
			}
			return mask
		}
		// Each admitted entry's code is hinted entriesAhead admitted
		// entries before it is scored (the first ones' at once): hint
		// is those not hinted yet of this block (its low bits) and the next.
		cur := admitted(0)
		first := cur // scored below, which the reach's sample leaves out
		var hint uint64
		if entriesAhead > 0 {
			hint = uint64(cur)
		}
		hintNext := func(b int) {
			o := (b + bits.TrailingZeros64(hint)) * cb
			PrefetchRange(unsafe.Pointer(&codes[o]), uintptr(cb))
			hint &= hint - 1
		}
		for b := 0; b < n; b += blockSize {
			next := admitted(b + blockSize)
			if entriesAhead > 0 {
				hint |= uint64(next) << blockSize
				for k := 0; b == 0 && k < entriesAhead && hint != 0; k++ {
					hintNext(b)
				}
			}
			for mask := cur; mask != 0; mask &= mask - 1 {
				i := b + bits.TrailingZeros32(mask)
				if hint != 0 {
					hintNext(b)
				}
				passed++
				res := residualScore(i)
				if residual {
					reach = max(reach, res)
					if extrapolate {
						rs.add(res)
					}
				}
				sc := base + res
				if collect {
					pend = append(pend, ivfAsk{ref | uint64(i), sc, d.ids[i], li})
					continue
				}
				if len(s.heap.h) == s.heap.k && sc <= s.heap.h[0].Score {
					continue
				}
				offer(ivfAsk{ref | uint64(i), sc, d.ids[i], li})
			}
			hint >>= blockSize
			cur = next
		}
		// A list whose entries the filter mostly rules out adds the rest
		// of its first block to the reach's sample (thinned once that
		// holds enough).
		if residual && passed-before < blockSize && n > 0 && samples(li) {
			for m := d.liveMask(0, n) &^ first; m != 0; m &= m - 1 {
				i := bits.TrailingZeros32(m)
				res := residualScore(i)
				reach = max(reach, res)
				if extrapolate {
					rs.add(res)
				}
				sampled++
			}
		}
	}
	for _, o := range order[:min(2*max(listsAhead, 0), len(order))] {
		st.lists[o.ID].d.Load().prefetchHeader()
	}
	// The lists scanned first hold their items in no order of score (an
	// agent's, an hour's: by time). Put in the heap as they come, every
	// item better than the heap's worst so far would be asked about
	// (Allow, a read of the item's record): in a heap filling in random
	// order, about keep·(1+ln(n/keep)) of n. Collected and taken best
	// first, the asks are about the admitted keep and those refused.
	collect = true
	for _, d := range pre {
		scan(d, 0, 0, false)
	}
	collect = false
	heapifyAsks(pend)
	for len(pend) > 0 {
		if len(s.heap.h) == s.heap.k && pend[0].score <= s.heap.h[0].Score {
			break // the rest score no higher
		}
		offer(popAsk(&pend))
	}
	flush()
	s.pend = pend[:0]
	// From an eighth of nprobe on, the lists left may be ruled out by
	// the bound alone (not with lists scanned first: the bound's reach
	// is of the residuals' scores, which they do not have).
	minProbe := nprobe
	if len(pre) == 0 {
		minProbe = max(1, nprobe/boundFrom)
	}
	for li := 0; li < nl; li++ {
		if li >= minProbe {
			// The stops read the heap and the counts: nothing may wait.
			flush()
			if bounded(li) || li >= nprobe && enough(li) {
				break
			}
		}
		if li == len(order) {
			order = s.nextLists(order, 4*li)
		}
		// The lists ahead: their first cache misses overlap this scan
		// instead of stalling theirs (listsAhead).
		if a := listsAhead; a > 0 {
			if ahead := li + 2*a; ahead < len(order) {
				st.lists[order[ahead].ID].d.Load().prefetchHeader()
			}
			if ahead := li + a; ahead < len(order) {
				st.lists[order[ahead].ID].d.Load().prefetchEntries(cb, blockwise, samples(ahead))
			}
			// The verdicts read ahead last time are this list's.
			s.cur, s.next = s.next, nil
			s.curMasks, s.nextMasks = s.nextMasks, s.curMasks
			if ahead := li + 1; blockwise && ahead < len(order) {
				s.next = st.lists[order[ahead].ID].d.Load()
				s.nextMasks = s.next.prefetchAdmitted(&mc, cb, s.nextMasks[:0])
			}
		}
		// Codes are of the residuals from the list's centre, whose
		// score ranked the list.
		scan(st.lists[order[li].ID].d.Load(), order[li].Score, li, true)
	}
	flush()
	s.asks = asks
	s.order = order
	s.cur, s.next = nil, nil
	hits, a, ok, rescored := s.rerank(q, k, x.dim, allow, hint)
	asked += a
	allowed += ok
	if stats != nil {
		stats.Lists += len(s.refs)
		stats.Scored += passed
		stats.Asked += asked
		stats.Allowed += allowed
		stats.Rescored += rescored
	}
	if deferred > 0 && len(hits) < k {
		return nil, true // some candidates went unasked (and were refused)
	}
	return hits, false
}

// boundFrom sets where a search that scans no lists first may begin to
// stop on the bound: past nprobe/boundFrom lists. A broad search finds
// its k best in its first two or three lists. On the medium bench's
// store, from an eighth of nprobe on (4 of 32 lists) rather than from
// half, the planner's prefilters scored 55% fewer items at the median
// and took 14–24% less time at p50 and 10–20% less on average (the
// broad queries' 29–36% less at p50: they scan 4 lists, not 16), at the
// same recall@10 (0.984–0.986 against 0.982–0.985; three stores). On
// BenchmarkIVFSearch's clustered 200k set an unfiltered search takes
// 103–125 µs at p50 against 153–158, recall@10 0.988 against 0.997.
// From the first list on, a search may stop before its sample of
// residual scores is fair: one query of 1,000 found none of its 10.
const boundFrom = 8

// boundK is the fewest best 4-bit scores the bound is held against: the
// lists left must not hold an item scoring above the boundK-th best.
// Against the first best alone (k = 1), a near tie by 4-bit score whose
// exact score is higher lies in a list the bound rules out too often:
// recall@1 0.855 with the bound from an eighth of nprobe on.
const boundK = 10

// heapifyAsks orders as a max-heap by score.
func heapifyAsks(as []ivfAsk) {
	for i := len(as)/2 - 1; i >= 0; i-- {
		siftAsk(as, i)
	}
}

// popAsk removes and returns the best of the max-heap *as.
func popAsk(as *[]ivfAsk) ivfAsk {
	h := *as
	top := h[0]
	h[0] = h[len(h)-1]
	h = h[:len(h)-1]
	siftAsk(h, 0)
	*as = h
	return top
}

func siftAsk(h []ivfAsk, i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if r := c + 1; r < len(h) && h[r].score > h[c].score {
			c = r
		}
		if h[i].score >= h[c].score {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// nextLists extends order, the best lists so far in probe order (best
// score first, ties by list number) whose sort keys are
// s.keys[:len(order)], to the best n (every list when n is more): the
// best of the other keys are selected and sorted. Selecting them and
// sorting only those is several times faster than sorting every list's
// key, and faster still than a heap of them.
func (s *ivfSearcher) nextLists(order []Hit, n int) []Hit {
	keys := s.keys
	lo := len(order)
	n = min(n, len(keys))
	selectSmallest(keys[lo:], n-lo)
	slices.Sort(keys[lo:n])
	for _, k := range keys[lo:n] {
		i := uint32(k)
		order = append(order, Hit{ID: uint64(i), Score: s.scores[i]})
	}
	return order
}

// listKey is list i's sort key for a list score sc: keys in increasing
// order are scores in decreasing order, ties by list number.
func listKey(sc float32, i int) uint64 {
	return uint64(^OrderedBits(sc))<<32 | uint64(uint32(i))
}

// selectSmallest reorders keys, which are distinct, so that its first m
// are its m smallest, in no particular order (quickselect, the pivot a
// median of three).
func selectSmallest(keys []uint64, m int) {
	// keys[:lo] are smaller than keys[lo:], keys[hi:] larger than
	// keys[:hi]; the m-th boundary lies within [lo, hi].
	lo, hi := 0, len(keys)
	for lo < m && m < hi {
		a, b, c := keys[lo], keys[lo+(hi-lo)/2], keys[hi-1]
		p := max(min(a, b), min(max(a, b), c))
		lt := lo
		for i := lo; i < hi; i++ {
			if keys[i] < p {
				keys[i], keys[lt] = keys[lt], keys[i]
				lt++
			}
		}
		for i := lt; i < hi; i++ {
			if keys[i] == p {
				keys[i], keys[lt] = keys[lt], keys[i]
				break
			}
		}
		// keys[lo:lt] < keys[lt] = p < keys[lt+1:hi]
		if m <= lt {
			hi = lt
		} else {
			lo = lt + 1
		}
	}
}

// OrderedBits maps a float32 to a uint32 of the same order (-0 as 0):
// sort keys of integers, which sort several times faster than floats
// compared by a function.
func OrderedBits(f float32) uint32 {
	if f == 0 {
		f = 0
	}
	b := math.Float32bits(f)
	if b>>31 != 0 {
		return ^b
	}
	return b | 1<<31
}

// rerank rescores the heap with the float32 vectors (an entry without
// one keeps its 4-bit score) and returns the best k, one hit per id (an
// id being replaced can be seen twice by a search racing the writer).
//
// It scores the candidates in order of the most their exact scores can
// be (rerankBound) and stops once the next one's bound is under the
// k-th best exact score admitted: the vectors of the rest (a quarter of
// them on the medium bench's store) are not read. Candidates that
// entered the heap unasked (deferred asks) are asked about in order of
// their exact scores, hinted ivfHintBatch at a time ahead, until k are
// admitted: those that cannot rank are never asked about. It returns
// how many it asked about, how many of those allow admitted and how many
// vectors it read.
func (s *ivfSearcher) rerank(q []float32, k, dim int, allow func(uint64) bool, hint func(uint64)) (hits []Hit, asked, allowed, rescored int) {
	if len(s.heap.h) == 0 || k <= 0 {
		return nil, 0, 0, 0
	}
	entry := func(ref uint64) (*listData, int) {
		ref &^= unasked
		return s.refs[ref>>32], int(uint32(ref))
	}
	qn := float32(math.Sqrt(float64(dot(q, q))))
	cs := s.cands[:0]
	for _, c := range s.heap.h {
		d, i := entry(c.ID)
		b := c.Score
		if d.vecs[i].Load() != nil {
			b = rerankBound(c.Score, d.steps[i], qn)
		}
		cs = append(cs, rerankCand{ref: c.ID, score: c.Score, bound: b})
	}
	slices.SortFunc(cs, func(a, b rerankCand) int {
		if c := cmp.Compare(b.bound, a.bound); c != 0 {
			return c
		}
		return cmp.Compare(a.ref, b.ref)
	})
	s.cands = cs
	// The vectors lie at random addresses, mostly out of cache: hinting
	// the start of each rerankAhead candidates before it is scored lets
	// their misses overlap.
	hintVec := func(j int) {
		if j < len(cs) {
			d, i := entry(cs[j].ref)
			if p := d.vecs[i].Load(); p != nil {
				prefetch(p)
			}
		}
	}
	for j := range min(rerankAhead, len(cs)) {
		hintVec(j)
	}
	// scored holds the candidates scored, best first (by score, then
	// ref); admitted walks it, asking about those not asked yet, until
	// it has k of distinct ids admitted, and returns them.
	scored := s.scored[:0]
	admitted := func() []rankedHit {
		taken := s.taken[:0]
		hinted := 0
		for n := range scored {
			if len(taken) == k {
				break
			}
			h := &scored[n]
			if slices.ContainsFunc(taken, func(t rankedHit) bool { return t.id == h.id }) {
				continue
			}
			if h.verdict == verdictNone {
				if hint != nil {
					for hinted = max(hinted, n); hinted < min(len(scored), n+ivfHintBatch); hinted++ {
						if a := &scored[hinted]; a.verdict == verdictNone && !a.hinted {
							hint(a.id)
							a.hinted = true
						}
					}
				}
				asked++
				h.verdict = verdictRefuses
				if allow(h.id) {
					allowed++
					h.verdict = verdictAdmits
				}
			}
			if h.verdict == verdictAdmits {
				taken = append(taken, *h)
			}
		}
		s.taken = taken
		return taken
	}
	for j, c := range cs {
		if len(scored) >= k && c.bound < scored[k-1].score {
			// The k best scored are above this one's bound: the k best
			// admitted may be too.
			if best := admitted(); len(best) == k && c.bound < best[k-1].score {
				break // neither this candidate nor any after it can rank
			}
		}
		hintVec(j + rerankAhead)
		d, i := entry(c.ref)
		h := rankedHit{ref: c.ref, id: d.ids[i], score: c.score, verdict: verdictAdmits}
		if c.ref&unasked != 0 {
			h.verdict = verdictNone
		}
		if p := d.vecs[i].Load(); p != nil {
			h.score = dot(q, unsafe.Slice(p, dim))
			rescored++
		}
		at, _ := slices.BinarySearchFunc(scored, h, func(a, b rankedHit) int {
			if c := cmp.Compare(b.score, a.score); c != 0 {
				return c
			}
			return cmp.Compare(a.ref, b.ref)
		})
		scored = slices.Insert(scored, at, h)
	}
	s.scored = scored
	best := admitted()
	hits = make([]Hit, len(best))
	for j, h := range best {
		hits[j] = Hit{ID: h.id, Score: h.score}
	}
	return hits, asked, allowed, rescored
}

// rerankSteps and rerankSlack bound how far a candidate's 4-bit score
// falls below its exact one (rerankBound): rerankSteps steps of its
// code, plus rerankSlack, times the query's norm. Each of the code's
// 384 values is off by up to half a step, so the score's error is a sum
// of 384 small independent ones: on the medium bench's store, over 1.24
// M candidates of 13,959 searches, its standard deviation was 0.30
// steps (√(1/12), as for uniform errors) and its largest 1.69 (the
// query's int8 rounding and the list centre's int8 code add a little).
// Two steps is 6.7 standard deviations; no search's hits changed, and
// the bound left 27% of the candidates unscored. It is a bound in
// probability, not a sure one: a query that leans on one vector's
// rounding errors, a sign for each, could find it up to about 5 steps
// off (the sure bound, half a step per value, is about 10), and miss
// it as the index misses other near items; queries that are stored
// vectors themselves (TestRerankStopChangesNoHit's) do not.
const (
	rerankSteps = 2
	rerankSlack = 0.002
)

// rerankAhead is how many candidates ahead rerank hints the vectors of.
const rerankAhead = 16

// rerankEarly lets rerank stop before the candidates run out; false for
// the tests that check the stop changes no hit.
var rerankEarly = true

// rerankBound is the most the exact score of a candidate can be whose
// 4-bit score is score and its code's step step, for a query of norm
// qn (+Inf with rerankEarly off).
func rerankBound(score, step, qn float32) float32 {
	if !rerankEarly {
		return float32(math.Inf(1))
	}
	return score + (rerankSteps*step+rerankSlack)*qn
}

// rerankCand is a heap entry's ref, its 4-bit score and its bound.
type rerankCand struct {
	ref          uint64
	score, bound float32
}

// rankedHit is a candidate scored exactly: its ref (ties go to the
// lower), its id, its score and Allow's verdict on it.
type rankedHit struct {
	ref     uint64
	id      uint64
	score   float32
	verdict verdict
	hinted  bool
}

// verdict is what Allow said of a candidate, if it was asked.
type verdict uint8

const (
	verdictNone verdict = iota // entered the heap unasked, not asked yet
	verdictAdmits
	verdictRefuses
)

// reachStats are the count, sum and sum of squares of the residual
// scores a search has seen: what the largest residual score among the
// items it has not seen is extrapolated from (beyond).
type reachStats struct {
	n       int
	sum, sq float64
}

func (r *reachStats) add(v float32) {
	r.n++
	r.sum += float64(v)
	r.sq += float64(v) * float64(v)
}

// beyond is how far the largest residual score among the index's items
// left unseen (total less those seen) may lie above the largest seen:
// for n roughly normal scores of deviation σ the largest lies about
// σ·√(2 ln n) above their mean, so past n seen and m unseen it grows by
// σ·(√(2 ln m) − √(2 ln n)). The bound's reach is a sample's maximum,
// and a maximum grows with the sample: against a query that nothing
// lies close to, whose best scores are near ties that residuals decide,
// the sample's maximum stopped the search while lists it had not probed
// held better items.
func (r *reachStats) beyond(total int) float32 {
	if r.n < 2 {
		return 0
	}
	m := r.sum / float64(r.n)
	sd := math.Sqrt(max(0, r.sq/float64(r.n)-m*m))
	left := float64(max(total-r.n, 2))
	return float32(max(0, sd*(math.Sqrt(2*math.Log(left))-math.Sqrt(2*math.Log(float64(r.n))))))
}

// reachBeyondShare is the share of reachStats.beyond that a search with
// lists scanned first (a split's: the catch-alls' index after a key's
// lists) adds to the bound's reach. The heap of such a search is filled
// by the keys' items, and the catch-alls' bound rests on the residuals
// of the few lists it probed. On the medium bench's store, the same
// index asked the same 1,000 queries three times each way: recall@10
// 0.9840–0.9856 without, 0.9892–0.9897 with half of beyond (the queries
// admitting < 1% 0.937–0.944 against 0.958–0.960, the same-agent ones
// 0.934–0.947 against 0.962–0.966), at 4–6% more index search time on
// average (9–11% more items scored). All of beyond found no more
// (0.9892–0.9910) and scored 14–16% more; a quarter of it found 0.9871; beyond
// in every search, not only these, found no more and cost more
// (BENCHMARKS.md, forty-ninth round).
var reachBeyondShare float32 = 0.5 // a variable for tests
