package daemon

import (
	"context"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ctxgraph/ctxgraph/cmd/internal/client"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds"
)

// holdHandler is a slog.Handler that holds the first record logged with
// component=hold.component (an attribute given by Logger.With) until
// release is closed, and drops every record. Held in Badger's logger,
// it holds the store's open where Badger logs.
type holdHandler struct {
	attrs []slog.Attr
	hold  *hold
}

type hold struct {
	component string
	once      sync.Once
	held      chan struct{} // closed when a record is held
	release   chan struct{}
}

func (h holdHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h holdHandler) Handle(context.Context, slog.Record) error {
	if slices.ContainsFunc(h.attrs, func(a slog.Attr) bool { return a.Key == "component" && a.Value.String() == h.hold.component }) {
		h.hold.once.Do(func() {
			close(h.hold.held)
			<-h.hold.release
		})
	}
	return nil
}

func (h holdHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return holdHandler{attrs: append(slices.Clip(h.attrs), as...), hold: h.hold}
}

func (h holdHandler) WithGroup(string) slog.Handler { return h }

// The embedded NATS server starts beside the store's open, not after it:
// after a crash JetStream reads back every block of its streams, and
// that no longer waits for the view's load. Here Badger's open is held
// (its first log record blocks) while a controller connects with its
// credentials and publishes a step, which JetStream acknowledges, and a
// client with a wrong password is refused. Released, the daemon serves,
// applies the step, and has recorded the refusal in the store. Before
// the change NATS started only once the store was open: nothing could
// connect while it was held, and the test fails waiting for it.
func TestNATSServesWhileTheStoreOpens(t *testing.T) {
	cfg := secureConfig(t)
	cfg.NATS.Addr = freePort(t)
	url := "nats://" + cfg.NATS.Addr
	h := &hold{component: "badger", held: make(chan struct{}), release: make(chan struct{})}
	var released sync.Once
	release := func() { released.Do(func() { close(h.release) }) }

	var d *Daemon
	var startErr error
	started := make(chan struct{})
	go func() {
		defer close(started)
		d, startErr = Start(context.Background(), cfg, slog.New(holdHandler{hold: h}))
	}()
	t.Cleanup(func() { // however the test ends, before its directory goes
		release()
		<-started
		if d != nil {
			d.Shutdown(context.Background())
		}
	})
	select {
	case <-h.held:
	case <-started:
		t.Fatalf("the start ended (%v) without Badger logging during the store's open", startErr)
	case <-time.After(time.Minute):
		t.Fatal("Badger logged nothing within a minute of the start")
	}

	// The store's open is held. NATS comes up anyway.
	var nc *nats.Conn
	deadline := time.Now().Add(time.Minute)
	for {
		var err error
		if nc, err = nats.Connect(url, nats.UserInfo("alpha", "alpha-pass"), nats.Name("test-alpha")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("NATS not reachable while the store opened: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var alpha []*rlds.Message
	for _, m := range readMessages(t, "episodes.jsonl") {
		if m.Agent == "ur5-alpha" {
			alpha = append(alpha, m)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := client.NewPublisher(js, cfg.Prefix(), 0)
	for _, m := range alpha {
		if err := p.Publish(ctx, m); err != nil {
			t.Fatalf("publish while the store opened: %v", err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("JetStream did not acknowledge while the store opened: %v", err)
	}
	if bad, err := nats.Connect(url, nats.UserInfo("alpha", "wrong"), nats.MaxReconnects(0)); err == nil {
		bad.Close()
		t.Fatal("a wrong password connected")
	}
	select {
	case <-started:
		t.Fatalf("the start ended (%v) while the store's open was held", startErr)
	default:
	}

	release()
	<-started
	if startErr != nil {
		t.Fatalf("start: %v", startErr)
	}
	connectAs(t, d, "op", "op-pass").waitApplied()
	for _, m := range alpha {
		if _, err := d.Store().Episode(particle.DefaultNamespace, m.EpisodeID); err != nil {
			t.Fatalf("episode %s published while the store opened: %v", m.EpisodeID, err)
		}
	}
	d.sec.denials.flush()
	dens, err := d.Store().Denials(time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(dens, func(dn particle.Denial) bool {
		return dn.Action == "nats.connect" && dn.Status == 401 && strings.Contains(dn.Reason, "bad password")
	}) {
		t.Errorf("the refusal while the store opened was not recorded: %+v", dens)
	}
}

// A start whose store cannot open stops the NATS server it started
// beside it: the address is free again and the data directory unlocked.
func TestStoreFailureStopsTheEarlyNATS(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.NATS.Addr = freePort(t)
	// The graph's directory is a file: Badger cannot open it.
	if err := os.WriteFile(cfg.Data+"/graph", []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := Start(context.Background(), cfg, nil)
	if err == nil {
		d.Shutdown(context.Background())
		t.Fatal("a daemon started on a graph directory that is a file")
	}
	if d != nil || !strings.Contains(err.Error(), "graph") {
		t.Errorf("start returned %v, %q; want nil and an error about the graph", d, err)
	}
	l, lerr := (&net.ListenConfig{}).Listen(context.Background(), "tcp", cfg.NATS.Addr)
	if lerr != nil {
		t.Fatalf("the NATS address is still taken after the failed start: %v", lerr)
	}
	l.Close()
	if err := os.Remove(cfg.Data + "/graph"); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, cfg) // the data directory's lock was let go
}
