package planner

import (
	"fmt"
	"testing"
	"time"
)

// TestTextlessStrategyChoiceIsRemembered resolves the strategy of every
// combination of the flags a request without query text is rated by,
// for auto and temporal, with and without a keyword index, first each
// rated afresh and then all through the choices remembered
// (textlessChoices), for other counts of names: each must be the one
// rated afresh (a flag left out of the key would hand one combination
// another's choice), and a choice remembered is made without
// allocating.
func TestTextlessStrategyChoiceIsRemembered(t *testing.T) {
	at := t0.Add(time.Hour)
	type combo struct {
		f     *fixture
		name  string
		flags int
	}
	req := func(c combo, names int) *Request {
		r := &Request{Strategy: c.name, Query: "  "}
		if c.flags&1 != 0 {
			r.AsOf = &at
		}
		if c.flags&2 != 0 {
			r.TimeWindow = &TimeWindow{From: t0, To: at}
		}
		if c.flags&4 != 0 {
			for i := range names {
				r.Goals = append(r.Goals, fmt.Sprint("goal ", i))
			}
		}
		if c.flags&8 != 0 {
			r.Vector = c.f.embed("red block")
		}
		return r
	}
	var combos []combo
	for _, f := range []*fixture{lab(t, true), newFixture(t, false)} {
		for _, name := range []string{"", StrategyAuto, StrategyTemporal} {
			for flags := range 1 << 4 {
				if flags&(4|8) != 0 { // something to plan from
					combos = append(combos, combo{f, name, flags})
				}
			}
		}
	}
	forget := func() {
		for i := range textlessChoices {
			textlessChoices[i].Store(nil)
		}
	}
	choose := func(c combo, names int) string {
		s, b, r, err := c.f.p.chooseStrategy(req(c, names), testNS)
		if err != nil {
			t.Fatal(err)
		}
		return s + " | " + b + " | " + r
	}
	fresh := make([]string, len(combos))
	for i, c := range combos {
		forget()
		fresh[i] = choose(c, 3)
	}
	forget()
	for i, c := range combos {
		for pass, names := range []int{1, 2} { // the first may rate it, the second remembers
			if got := choose(c, names); got != fresh[i] {
				t.Fatalf("strategy %q, flags %04b, keyword index %v, pass %d: %s, rated afresh %s",
					c.name, c.flags, c.f.p.opts.Keyword != nil, pass, got, fresh[i])
			}
		}
		r := req(c, 1)
		if a := testing.AllocsPerRun(10, func() { c.f.p.chooseStrategy(r, testNS) }); a != 0 {
			t.Fatalf("strategy %q, flags %04b: %v allocations a choice remembered", c.name, c.flags, a)
		}
	}
}
