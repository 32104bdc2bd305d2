package session

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
)

// Forgetting is a forget in progress over the sessions of one namespace:
// it holds the manager's read-modify-write lock, so that no session
// update can write back a name it read before the forget.
type Forgetting struct {
	m       *Manager
	ns      string
	names   map[string]bool
	changed []*Session
	done    bool
}

// BeginForget starts removing names (compared by canonical form) from
// the sessions of namespace ns. Call Scrub inside the store batch that
// forgets them, then End after it, committed or not.
func (m *Manager) BeginForget(ns string, names []string) *Forgetting {
	m.rmw.Lock()
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[particle.Canonical(n)] = true
	}
	return &Forgetting{m: m, ns: ns, names: set}
}

// Scrub removes the names from every stored session's active entities,
// goals, tools and intents in batch b, and returns how many changed.
func (f *Forgetting) Scrub(b *particle.Batch) (int, error) {
	f.changed = nil
	return b.ScrubSessions(f.ns, func(raw []byte) ([]byte, bool, error) {
		var s Session
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, false, err
		}
		changed := false
		for _, l := range []*[]string{&s.ActiveEntities, &s.Goals, &s.Tools, &s.Intents} {
			kept := slices.DeleteFunc(slices.Clone(*l), func(n string) bool { return f.names[particle.Canonical(n)] })
			if len(kept) != len(*l) {
				*l, changed = kept, true
			}
		}
		if !changed {
			return raw, false, nil
		}
		s.UpdatedAt = time.Now().UTC()
		out, err := json.Marshal(&s)
		if err == nil {
			f.changed = append(f.changed, &s)
		}
		return out, err == nil, err
	})
}

// End releases the lock; if committed, the scrubbed sessions replace
// their cached copies and are pushed to subscribers.
func (f *Forgetting) End(committed bool) {
	if f.done {
		return
	}
	f.done = true
	defer f.m.rmw.Unlock()
	if !committed {
		return
	}
	f.m.mu.Lock()
	for _, s := range f.changed {
		f.m.cache[s.Namespace+"\x00"+s.ID] = s
	}
	subs := f.m.subs
	f.m.mu.Unlock()
	for _, s := range f.changed {
		for _, fn := range subs {
			c := *s
			fn(&c)
		}
	}
}
