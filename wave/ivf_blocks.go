package wave

import (
	"math"
	"sync/atomic"
)

// A list's entries are summarised in blocks of 16 consecutive positions,
// so that a search under a time window skips the blocks none of whose
// entries can overlap it without reading their metas. Lists are filled
// in ingest order, which is roughly time order, so a narrow window
// touches few blocks of each list.
const blockShift = 4

// blockSum is one block's summary, conservative: it may admit a block
// none of whose entries passes, never the reverse. The writer widens it
// as entries arrive or change scope; searches read it atomically.
type blockSum struct {
	// lo and hi bound the scopes of the block's timed entries: the
	// smallest start (an open start is MinInt64) and the largest end (an
	// open end is MaxInt64); MaxInt64 and MinInt64 when there are none.
	lo, hi atomic.Int64
	// timeless has bit kind&31 set for each kind of entry without a time
	// scope (Time and End 0), which every window admits.
	timeless atomic.Uint32
	// agents is a one-word Bloom filter of the entries' agent keys
	// (agentBit); an entry that every agent filter admits (no agent, or
	// several) sets every bit.
	agents atomic.Uint64
}

// agentBit is the bit of agent key a in a block's agents filter (all
// bits for 0 and for sets of agents, which many agent filters admit).
func agentBit(a uint32) uint64 {
	if a == 0 || a&agentSetFlag != 0 {
		return math.MaxUint64
	}
	return 1 << (uint64(a) * 0x9E3779B97F4A7C15 >> 58)
}

func newBlocks(capacity int) []blockSum {
	bs := make([]blockSum, (capacity+1<<blockShift-1)>>blockShift)
	for i := range bs {
		bs[i].lo.Store(math.MaxInt64)
		bs[i].hi.Store(math.MinInt64)
	}
	return bs
}

// widen includes a scope of an entry of the given kind (writer only).
func (b *blockSum) widen(kind Kind, start, end int64) {
	if start == 0 && end == 0 {
		b.timeless.Store(b.timeless.Load() | 1<<(kind&31))
		return
	}
	if start == 0 {
		start = math.MinInt64
	}
	if end == 0 {
		end = math.MaxInt64
	}
	if start < b.lo.Load() {
		b.lo.Store(start)
	}
	if end > b.hi.Load() {
		b.hi.Store(end)
	}
}

// widenAt includes entry i's current scope and agent in its block
// (writer only).
func (d *listData) widenAt(i int) {
	m := &d.metas[i]
	b := &d.blk[i>>blockShift]
	b.widen(m.kind, atomic.LoadInt64(&m.time), atomic.LoadInt64(&m.end))
	if bit := agentBit(atomic.LoadUint32(&m.agent)); b.agents.Load()&bit != bit {
		b.agents.Store(b.agents.Load() | bit)
	}
}

// blockwise reports whether c can rule out whole blocks: it has a time
// window or an agent.
func (c *metaCheck) blockwise() bool { return c.from != 0 || c.to != 0 || c.agent != 0 }

// skips reports whether c's time window or agent rules out every entry
// of b.
func (c *metaCheck) skips(b *blockSum) bool {
	if c.agent != 0 && b.agents.Load()&c.agentBit == 0 {
		return true
	}
	if c.from == 0 && c.to == 0 {
		return false
	}
	if b.timeless.Load()&c.kinds32 != 0 {
		return false
	}
	return (c.to != 0 && b.lo.Load() > c.to) || (c.from != 0 && b.hi.Load() < c.from)
}
