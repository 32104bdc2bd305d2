package bench

import (
	"runtime"
	"slices"
	"sync"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner"
	"github.com/ctxgraph/ctxgraph/wave"
)

// eventFilter is the generator's model of what the planner's prefilter
// lets through of an event edge: the edge's policy for the request's
// roles, its confidence, its time (a new edge's time range is its
// instant), its site and its robot.
type eventFilter struct {
	visitor, operator bool
	minConf           float64
	from, to          int64 // unix nanoseconds; 0 is open
	site, robot       int32 // -1: any
}

func (g *gen) filterOf(req *planner.Request) eventFilter {
	f := eventFilter{visitor: slices.Contains(req.Roles, roleVisitor), operator: slices.Contains(req.Roles, roleOperator),
		minConf: req.MinConfidence, site: -1, robot: -1}
	if tw := req.TimeWindow; tw != nil {
		if !tw.From.IsZero() {
			f.from = tw.From.UnixNano()
		}
		if !tw.To.IsZero() {
			f.to = tw.To.UnixNano()
		}
	}
	if req.Location != "" {
		f.site = int32(g.p.Sites) // no site: admits no located edge
		for s := range g.p.Sites {
			if particle.Canonical(siteName(s)) == particle.Canonical(req.Location) {
				f.site = int32(s)
			}
		}
	}
	if req.SameAgent {
		f.robot = int32(g.p.Robots)
		for r := range g.p.Robots {
			if robotName(r) == req.Agent {
				f.robot = int32(r)
			}
		}
	}
	return f
}

func (f *eventFilter) admits(e *event) bool {
	switch {
	case e.deny && f.visitor, e.allow && !f.operator:
		return false
	case e.conf < f.minConf:
		return false
	case f.from != 0 && e.t < f.from, f.to != 0 && e.t > f.to:
		return false
	case f.site >= 0 && e.site != f.site, f.robot >= 0 && e.robot != f.robot:
		return false
	}
	return true
}

// truth fills every query's exact top max(k, 10) events and the
// fraction of events its filters admit, on all cores.
func (g *gen) truth(qs []Query) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				g.truthOf(&qs[i], g.qvecs[i])
			}
		}()
	}
	for i := range qs {
		next <- i
	}
	close(next)
	wg.Wait()
}

func (g *gen) truthOf(q *Query, v []float32) {
	k := max(q.Request.K, 10)
	f := g.filterOf(&q.Request)
	top := make([]wave.Hit, 0, k)
	admitted := 0
	for i := range g.events {
		if !f.admits(&g.events[i]) {
			continue
		}
		admitted++
		s := wave.Dot(v, g.vecs[i*Dims:(i+1)*Dims])
		if len(top) == k && s <= top[k-1].Score {
			continue
		}
		// Insert into the short list, best first.
		j := len(top)
		if j < k {
			top = append(top, wave.Hit{})
		} else {
			j = k - 1
		}
		for j > 0 && top[j-1].Score < s {
			top[j] = top[j-1]
			j--
		}
		top[j] = wave.Hit{ID: uint64(i), Score: s}
	}
	q.Admitted = float64(admitted) / float64(max(len(g.events), 1))
	for _, h := range top {
		e := &g.events[h.ID]
		q.Truth = append(q.Truth, Truth{Subject: g.names[e.subj], Object: g.names[e.obj], Score: h.Score})
	}
}
