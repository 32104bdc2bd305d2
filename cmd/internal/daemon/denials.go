package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
)

// denialLog records denials and tightens policy from them: every
// denial is kept (in the store, a batch at a time), and a role denied
// tighten_after times about one node within tighten_window gets a
// pending rule denying it that node, for an operator to approve.
type denialLog struct {
	store  *particle.Store
	log    *slog.Logger
	after  int
	window time.Duration
	count  func(status int)

	mu     sync.Mutex
	buf    []particle.Denial
	recent map[string][]time.Time // role \0 node -> times of denials

	flushMu sync.Mutex // one flush at a time, in order
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// denialFlushEvery is how often recorded denials are written.
const denialFlushEvery = 250 * time.Millisecond

func newDenialLog(store *particle.Store, log *slog.Logger, after int, window time.Duration, count func(int)) *denialLog {
	dl := &denialLog{store: store, log: log, after: after, window: window, count: count,
		recent: map[string][]time.Time{}, stop: make(chan struct{}), done: make(chan struct{})}
	go dl.run()
	return dl
}

func (dl *denialLog) run() {
	defer close(dl.done)
	t := time.NewTicker(denialFlushEvery)
	defer t.Stop()
	for {
		select {
		case <-dl.stop:
			return
		case <-t.C:
			dl.flush()
		}
	}
}

// close stops the flusher and writes what is left.
func (dl *denialLog) close() {
	dl.once.Do(func() {
		close(dl.stop)
		<-dl.done
		dl.flush()
	})
}

// flush writes the recorded denials.
func (dl *denialLog) flush() {
	dl.flushMu.Lock()
	defer dl.flushMu.Unlock()
	dl.mu.Lock()
	buf := dl.buf
	dl.buf = nil
	dl.mu.Unlock()
	if len(buf) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := dl.store.RecordDenials(ctx, buf); err != nil {
		dl.log.Error("denials not recorded", "count", len(buf), "err", err)
	}
}

// record keeps a denial and, for a read the policy hid, counts it
// toward tightening; it proposes a rule when a count is reached.
func (dl *denialLog) record(ctx context.Context, den particle.Denial) {
	if den.At.IsZero() {
		den.At = time.Now().UTC()
	}
	dl.count(den.Status)
	var propose []string // roles
	dl.mu.Lock()
	dl.buf = append(dl.buf, den)
	if dl.after > 0 && den.Status == http.StatusNotFound && den.Scope != "" {
		for _, role := range den.Roles {
			if role == RoleOperator {
				continue // never propose locking operators out
			}
			k := role + "\x00" + den.Scope
			times := dl.recent[k]
			cut := 0
			for cut < len(times) && den.At.Sub(times[cut]) > dl.window {
				cut++
			}
			times = append(times[cut:], den.At)
			if len(times) >= dl.after {
				propose = append(propose, role)
				times = nil // the count starts again after a proposal
			}
			dl.recent[k] = times
		}
	}
	dl.mu.Unlock()
	for _, role := range propose {
		if err := dl.propose(ctx, role, den); err != nil {
			dl.log.Error("denial tightening: proposal failed", "role", role, "node", den.Scope, "err", err)
		}
	}
}

// propose adds a pending rule denying role the node den.Scope, unless an
// active or pending rule already does.
func (dl *denialLog) propose(ctx context.Context, role string, den particle.Denial) error {
	for _, r := range dl.store.Rules("") {
		if (r.Status == particle.RuleActive || r.Status == particle.RulePending) && r.Effect == particle.EffectDeny &&
			r.Target.Node == den.Scope && slices.Contains(r.Roles, role) {
			return nil
		}
	}
	name := den.Scope
	if n, err := dl.store.Node(den.Scope); err == nil {
		name = fmt.Sprintf("%s %q", n.Type, n.Name)
	}
	why := fmt.Sprintf("%d denials of role %s about %s within %s (last: %s %s, rule %s)",
		dl.after, role, name, dl.window, den.Action, den.Item, den.Rule)
	_, err := dl.store.EditPolicy(ctx, particle.Edit{Op: particle.OpPropose, Who: "denial-tightening", Why: why,
		Rule: &particle.Rule{Effect: particle.EffectDeny, Roles: []string{role}, Target: particle.Target{Node: den.Scope},
			Namespace: den.Namespace, Source: "tightening",
			Proposal: &particle.Proposal{Role: role, Scope: den.Scope, Denials: dl.after, Window: dl.window, Last: den.At}}})
	if err == nil {
		dl.log.Info("denial tightening: proposed a rule", "role", role, "node", den.Scope)
	}
	return err
}
