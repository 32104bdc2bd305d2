package wave

import (
	"math"
	"sync/atomic"
)

// A list's entries are summarised in blocks of 16 consecutive positions,
// so that a search under a time window, an agent or a site reads only
// the entries of a block that can pass: the block's summary rules out
// its timed entries (or its entries of one agent, or at a site) as a
// whole, and a mask names the rest, those without a time scope (or
// without one agent, or without a site), which every window (or agent,
// or site) admits. Lists are filled in ingest order, which is roughly
// time order, so a narrow window touches few blocks of each list, and in
// those it passes over the nodes and other timeless entries scattered
// among the edges one by one.
const (
	blockShift = 4
	blockSize  = 1 << blockShift
	blockAll   = 1<<blockSize - 1 // a mask of every entry of a block
)

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
	// open has bit j set for the block's entry j when it has no time
	// scope, and bit blockSize+j when it has no agent or several: the
	// entries that lo and hi, or agents, do not summarise.
	open atomic.Uint32
	// agents is a one-word Bloom filter of the agent keys of the block's
	// entries of one agent (agentBit).
	agents atomic.Uint64
	// sites is a one-word Bloom filter of the site keys of the block's
	// entries that have one (siteBit); unsited has bit j set when entry
	// j has none, which every site admits.
	sites   atomic.Uint64
	unsited atomic.Uint32
	// dead has bit j set when the block's entry j is a tombstone.
	dead atomic.Uint32
}

// agentBit is the bit of agent key a in a block's agents filter (all
// bits for 0 and for sets of agents, which many agent filters admit).
func agentBit(a uint32) uint64 {
	if a == 0 || a&agentSetFlag != 0 {
		return math.MaxUint64
	}
	return bloomBit(a)
}

// siteBit is the bit of site key s (not 0) in a block's sites filter.
func siteBit(s uint32) uint64 { return bloomBit(s) }

// bloomBit is key k's bit in a one-word Bloom filter.
func bloomBit(k uint32) uint64 { return 1 << (uint64(k) * 0x9E3779B97F4A7C15 >> 58) }

func newBlocks(capacity int) []blockSum {
	bs := make([]blockSum, (capacity+blockSize-1)>>blockShift)
	for i := range bs {
		bs[i].lo.Store(math.MaxInt64)
		bs[i].hi.Store(math.MinInt64)
	}
	return bs
}

// copyFrom sets b's summary and tombstones to o's (writer only).
func (b *blockSum) copyFrom(o *blockSum) {
	b.lo.Store(o.lo.Load())
	b.hi.Store(o.hi.Load())
	b.timeless.Store(o.timeless.Load())
	b.open.Store(o.open.Load())
	b.agents.Store(o.agents.Load())
	b.sites.Store(o.sites.Load())
	b.unsited.Store(o.unsited.Load())
	b.dead.Store(o.dead.Load())
}

// widen includes a scope of the block's entry j, of the given kind
// (writer only).
func (b *blockSum) widen(j int, kind Kind, start, end int64) {
	if start == 0 && end == 0 {
		b.timeless.Store(b.timeless.Load() | 1<<(kind&31))
		b.open.Store(b.open.Load() | 1<<j)
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

// widenAt includes entry i's current scope, site and agent in its
// block (writer only).
func (d *listData) widenAt(i int) {
	m := &d.metas[i]
	b := &d.blk[i>>blockShift]
	j := i & (blockSize - 1)
	b.widen(j, m.kind, atomic.LoadInt64(&m.time), atomic.LoadInt64(&m.end))
	if site := atomic.LoadUint32(&m.place) >> 8; site == 0 {
		b.unsited.Store(b.unsited.Load() | 1<<j)
	} else if bit := siteBit(site); b.sites.Load()&bit != bit {
		b.sites.Store(b.sites.Load() | bit)
	}
	a := atomic.LoadUint32(&m.agent)
	if a == 0 || a&agentSetFlag != 0 {
		b.open.Store(b.open.Load() | 1<<(blockSize+j))
		return
	}
	if bit := agentBit(a); b.agents.Load()&bit != bit {
		b.agents.Store(b.agents.Load() | bit)
	}
}

// blockwise reports whether c can rule out entries by block: it has a
// time window, an agent or a site.
func (c *metaCheck) blockwise() bool { return c.from != 0 || c.to != 0 || c.agent != 0 || c.site != 0 }

// visit returns the mask of b's entries that c's time window, agent and
// site may admit (blockAll when the summary rules out none of them, 0
// when it rules out all): those the summary's scope, agents or sites
// rule out are left out, except the entries that it does not summarise
// (open, unsited).
func (c *metaCheck) visit(b *blockSum) uint32 {
	mask := uint32(blockAll)
	if c.agent != 0 && b.agents.Load()&c.agentBit == 0 {
		mask &= b.open.Load() >> blockSize
	}
	if c.site != 0 && b.sites.Load()&c.siteBit == 0 {
		mask &= b.unsited.Load()
	}
	if (c.to != 0 && b.lo.Load() > c.to) || (c.from != 0 && b.hi.Load() < c.from) {
		if b.timeless.Load()&c.kinds32 == 0 {
			return 0
		}
		mask &= b.open.Load() & blockAll
	}
	return mask
}
