package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner"
)

// fakeMsg is a pulled message with a body; nothing else of it is used.
type fakeMsg struct {
	jetstream.Msg
	body []byte
}

func (m *fakeMsg) Data() []byte { return m.body }

// collect takes what has arrived, up to the batch size, without waiting
// for more, and decodes each batch in order.
func TestCollectTakesWhatHasArrived(t *testing.T) {
	c := &consumer{d: &Daemon{cfg: DefaultConfig()}}
	c.d.cfg.Ingest.MaxMessageBytes = 8
	c.decode = func(m jetstream.Msg) (*decoded, error) {
		if string(m.Data()) == "bad" {
			return nil, errors.New("undecodable")
		}
		return &decoded{msg: m, id: string(m.Data())}, nil
	}
	in := make(chan jetstream.Msg, 16)
	for _, body := range []string{"m0", "m1", "bad", "m3", "toolong-m4", "m5", "m6"} {
		in <- &fakeMsg{body: []byte(body)}
	}
	out := make(chan pulled, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.collect(ctx, in, 3, out)
	}()
	var got []string
	for _, want := range []int{3, 3, 1} {
		p := <-out
		if len(p.msgs) != want || len(p.results) != want {
			t.Fatalf("batch of %d messages (%d results), want %d", len(p.msgs), len(p.results), want)
		}
		for i, r := range p.results {
			switch {
			case r.err != nil:
				got = append(got, fmt.Sprintf("%s:err", p.msgs[i].Data()))
			case r.dm.msg != p.msgs[i]:
				t.Fatalf("result %d decodes another message", i)
			default:
				got = append(got, r.dm.id)
			}
		}
	}
	cancel()
	<-done
	if want := "[m0 m1 bad:err m3 toolong-m4:err m5 m6]"; fmt.Sprint(got) != want {
		t.Errorf("decoded %v, want %s", got, want)
	}
}

// A decoded batch waiting for the committer takes, and decodes, what
// arrives meanwhile, up to the batch size; the rest starts the next.
func TestCollectGrowsTheWaitingBatch(t *testing.T) {
	c := &consumer{d: &Daemon{cfg: DefaultConfig()}}
	c.decode = func(m jetstream.Msg) (*decoded, error) { return &decoded{msg: m, id: string(m.Data())}, nil }
	in := make(chan jetstream.Msg, 16)
	out := make(chan pulled) // the committer is busy until we receive
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.collect(ctx, in, 3, out)
	}()
	waitFor := func(left int, what string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); len(in) > left; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d messages still waiting in the pull channel", what, len(in))
			}
		}
	}
	in <- &fakeMsg{body: []byte("m0")}
	waitFor(0, "m0 not taken") // its batch now waits on out
	for _, body := range []string{"m1", "m2", "m3"} {
		in <- &fakeMsg{body: []byte(body)}
	}
	waitFor(1, "the waiting batch did not take m1 and m2") // m3 cannot join (full)
	ids := func(p pulled) []string {
		var s []string
		for i, r := range p.results {
			if r.err != nil || r.dm.msg != p.msgs[i] {
				t.Fatalf("result %d: %+v", i, r)
			}
			s = append(s, r.dm.id)
		}
		return s
	}
	if got := fmt.Sprint(ids(<-out)); got != "[m0 m1 m2]" {
		t.Errorf("waiting batch: %s, want [m0 m1 m2]", got)
	}
	if got := fmt.Sprint(ids(<-out)); got != "[m3]" {
		t.Errorf("next batch: %s, want [m3]", got)
	}
	cancel()
	<-done
}

// Decoding and applying give way to a running planner call: neither
// starts on a message until the call leaves.
func TestIngestGivesWayToThePlanner(t *testing.T) {
	o := particle.DefaultOptions(t.TempDir())
	o.SyncWrites = false
	store, err := particle.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	c := &consumer{d: &Daemon{cfg: DefaultConfig(), store: store}}
	var decodedN, appliedN atomic.Int32
	c.decode = func(m jetstream.Msg) (*decoded, error) {
		decodedN.Add(1)
		return &decoded{msg: m, apply: func(context.Context, *particle.Batch) error { appliedN.Add(1); return nil }}, nil
	}
	// waitFor runs fn while a planner call runs, checks it has done
	// nothing 50 ms on, lets the call leave and waits for fn. Each has
	// a Priority of its own: one window right after another would not
	// open (the background keeps half the time).
	waitFor := func(what string, fn func(), n *atomic.Int32) {
		t.Helper()
		pri := planner.NewPriority(time.Hour)
		c.d.priority = pri
		pri.Enter()
		done := make(chan struct{})
		go func() { fn(); close(done) }()
		time.Sleep(50 * time.Millisecond)
		if got := n.Load(); got != 0 {
			pri.Leave()
			t.Fatalf("%s %d message(s) while a planner call ran", what, got)
		}
		pri.Leave()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s nothing once the call left", what)
		}
	}
	var results []decodeResult
	waitFor("decoded", func() {
		results = c.decodeAll([]jetstream.Msg{&fakeMsg{body: []byte("m0")}, &fakeMsg{body: []byte("m1")}})
	}, &decodedN)
	if decodedN.Load() != 2 || results[0].err != nil || results[1].err != nil {
		t.Fatalf("decoded %d messages (%+v), want 2", decodedN.Load(), results)
	}
	var commitErr error
	waitFor("applied", func() { commitErr = c.commit(context.Background(), []*decoded{results[0].dm, results[1].dm}) }, &appliedN)
	if commitErr != nil || appliedN.Load() != 2 {
		t.Fatalf("applied %d messages (err %v), want 2", appliedN.Load(), commitErr)
	}
}

// A pull of steps messages is committed in transactions of about
// ingest.batch_size steps: a steps message weighs its steps, anything
// else (or a message that did not decode) one, and a transaction takes
// one message at least, however heavy.
func TestWeighedCutsAPullBySteps(t *testing.T) {
	results := func(steps ...int) []decodeResult {
		out := make([]decodeResult, len(steps))
		for i, n := range steps {
			if n >= 0 {
				out[i].dm = &decoded{steps: n}
			}
		}
		return out
	}
	for _, c := range []struct {
		steps []int
		size  int
		want  int
	}{
		{[]int{0, 0, 0, 0}, 3, 3},   // step messages: one each
		{[]int{8, 8, 8}, 16, 2},     // two steps messages fill 16
		{[]int{8, 8, 8}, 15, 1},     // the second would pass 15
		{[]int{40, 1}, 16, 1},       // one over the size goes alone
		{[]int{-1, -1, 8}, 9, 2},    // undecoded messages weigh one
		{[]int{4, 4, 4, 4}, 100, 4}, // all fit
	} {
		if got := weighed(results(c.steps...), c.size); got != c.want {
			t.Errorf("weighed(%v, %d) = %d, want %d", c.steps, c.size, got, c.want)
		}
	}
}
