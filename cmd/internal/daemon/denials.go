package daemon

import (
	"context"
	"errors"
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
//
// It buffers from the start of the daemon and writes once attach gives
// it the store: the embedded NATS server refuses connections, and
// records the refusals, while the store is still opening.
type denialLog struct {
	log    *slog.Logger
	after  int
	window time.Duration
	count  func(status int)

	mu     sync.Mutex
	store  *particle.Store // nil until attach
	buf    []particle.Denial
	recent map[string][]time.Time // role \0 node -> times of denials

	flushMu sync.Mutex // one flush at a time, in order
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// denialFlushEvery is how often recorded denials are written.
const denialFlushEvery = 250 * time.Millisecond

func newDenialLog(log *slog.Logger, after int, window time.Duration, count func(int)) *denialLog {
	return &denialLog{log: log, after: after, window: window, count: count,
		recent: map[string][]time.Time{}, stop: make(chan struct{}), done: make(chan struct{})}
}

// attach gives the log its store and starts writing to it, what was
// recorded before first.
func (dl *denialLog) attach(store *particle.Store) {
	dl.mu.Lock()
	dl.store = store
	dl.mu.Unlock()
	go dl.run()
}

// storeOf is the store attach gave, or nil.
func (dl *denialLog) storeOf() *particle.Store {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	return dl.store
}

func (dl *denialLog) run() {
	defer close(dl.done)
	dl.flush()
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

// close stops the flusher and writes what is left; without a store (a
// start that failed before its store opened) it logs what it drops.
func (dl *denialLog) close() {
	dl.once.Do(func() {
		dl.mu.Lock()
		store, n := dl.store, len(dl.buf)
		dl.mu.Unlock()
		if store == nil {
			if n > 0 {
				dl.log.Warn("denials not recorded: the store never opened", "count", n)
			}
			return
		}
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
	store, buf := dl.store, dl.buf
	if store != nil {
		dl.buf = nil
	}
	dl.mu.Unlock()
	if store == nil || len(buf) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := store.RecordDenials(ctx, buf); err != nil {
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
	store := dl.storeOf()
	if store == nil {
		return errors.New("the store is not open yet")
	}
	for _, r := range store.Rules("") {
		if (r.Status == particle.RuleActive || r.Status == particle.RulePending) && r.Effect == particle.EffectDeny &&
			r.Target.Node == den.Scope && slices.Contains(r.Roles, role) {
			return nil
		}
	}
	name := den.Scope
	if n, err := store.Node(den.Scope); err == nil {
		name = fmt.Sprintf("%s %q", n.Type, n.Name)
	}
	why := fmt.Sprintf("%d denials of role %s about %s within %s (last: %s %s, rule %s)",
		dl.after, role, name, dl.window, den.Action, den.Item, den.Rule)
	_, err := store.EditPolicy(ctx, particle.Edit{Op: particle.OpPropose, Who: "denial-tightening", Why: why,
		Rule: &particle.Rule{Effect: particle.EffectDeny, Roles: []string{role}, Target: particle.Target{Node: den.Scope},
			Namespace: den.Namespace, Source: "tightening",
			Proposal: &particle.Proposal{Role: role, Scope: den.Scope, Denials: dl.after, Window: dl.window, Last: den.At}}})
	if err == nil {
		dl.log.Info("denial tightening: proposed a rule", "role", role, "node", den.Scope)
	}
	return err
}
