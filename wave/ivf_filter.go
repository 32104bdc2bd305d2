package wave

import (
	"math"
	"sync/atomic"
)

// metaCheck is a [Filter]'s Meta fields compiled for the IVF scan loop:
// kinds and types as bitsets, checked against a list's packed metas
// without building a Meta. It admits exactly what Filter.admitsMeta
// admits.
type metaCheck struct {
	ns       uint32
	from, to int64
	agent    uint32
	agentBit uint64 // agentBit(agent)
	site     uint32 // 24 bits
	siteBit  uint64 // siteBit(site), if not 0
	minConf  uint8
	kinds    *[4]uint64 // nil: any
	types    *[4]uint64 // nil: any
	// kinds32 has bit kind&31 set for the kinds admitted (all: any).
	kinds32 uint32
}

func compileMeta(f *Filter) metaCheck {
	c := metaCheck{ns: f.Namespace, from: f.From, to: f.To, kinds32: math.MaxUint32,
		agent: f.Agent, agentBit: agentBit(f.Agent), site: f.Site & siteMask, minConf: f.MinConfidence}
	if c.site != 0 {
		c.siteBit = siteBit(c.site)
	}
	if len(f.Kinds) > 0 {
		c.kinds = new([4]uint64)
		c.kinds32 = 0
		for _, k := range f.Kinds {
			c.kinds[k>>6] |= 1 << (k & 63)
			c.kinds32 |= 1 << (k & 31)
		}
	}
	if len(f.Types) > 0 {
		c.types = new([4]uint64)
		for _, t := range f.Types {
			c.types[t>>6] |= 1 << (t & 63)
		}
	}
	return c
}

// admits reports whether m passes (the fields SetMeta changes in place
// read atomically).
func (c *metaCheck) admits(m *nodeMeta) bool {
	if c.ns != 0 && m.ns != c.ns {
		return false
	}
	if c.kinds != nil && c.kinds[m.kind>>6]&(1<<(m.kind&63)) == 0 {
		return false
	}
	if c.types != nil && c.types[m.typ>>6]&(1<<(m.typ&63)) == 0 {
		return false
	}
	if c.agent != 0 && !AgentFilterAdmits(c.agent, atomic.LoadUint32(&m.agent)) {
		return false
	}
	if c.site != 0 || c.minConf != 0 {
		place := atomic.LoadUint32(&m.place)
		if !admitsSite(c.site, place>>8) {
			return false
		}
		if conf := uint8(place); c.minConf != 0 && conf != 0 && conf < c.minConf {
			return false
		}
	}
	if c.to != 0 {
		if t := atomic.LoadInt64(&m.time); t != 0 && t > c.to {
			return false
		}
	}
	if c.from != 0 {
		if e := atomic.LoadInt64(&m.end); e != 0 && e < c.from {
			return false
		}
	}
	return true
}
