package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkDedupeWindowHeap measures the memory JetStream's duplicate
// window (nats.dedupe_window) holds per message: the server remembers
// every Nats-Msg-Id published inside the window, so a daemon taking R
// messages/s holds R × window ids on its heap, which every garbage
// collection then marks. "ids" publishes with the daemon's ids
// (<episode>/<step>), "no-ids" without any; the difference is the
// window's cost. The stream is the daemon's RLDS stream, as configured
// by default.
//
//	go test ./cmd/internal/daemon -run '^$' -bench DedupeWindowHeap -benchtime 200000x
func BenchmarkDedupeWindowHeap(b *testing.B) {
	for _, withIDs := range []bool{true, false} {
		name := "no-ids"
		if withIDs {
			name = "ids"
		}
		b.Run(name, func(b *testing.B) { benchDedupeHeap(b, withIDs) })
	}
}

func benchDedupeHeap(b *testing.B, withIDs bool) {
	cfg := DefaultConfig()
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true,
		JetStream: true, StoreDir: filepath.Join(b.TempDir(), "jetstream"),
	})
	if err != nil {
		b.Fatal(err)
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		b.Fatal("nats: not ready")
	}
	nc, err := nats.Connect(ns.ClientURL(), nats.InProcessServer(ns))
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	sc := streamConfigs(cfg)[0]
	if sc.Duplicates <= time.Minute {
		b.Fatalf("the default window %v is too short to hold a run's ids", sc.Duplicates)
	}
	if _, err := js.CreateStream(ctx, sc); err != nil {
		b.Fatal(err)
	}
	subj := cfg.Prefix() + ".rlds.robot-1.episode"
	body := make([]byte, 256)
	ids := make([]string, b.N)
	ep := uuid.NewString()
	for i := range ids {
		if i%500 == 0 {
			ep = uuid.NewString()
		}
		ids[i] = fmt.Sprintf("%s/%d", ep, i%500)
	}

	before := heapNow()
	b.ResetTimer()
	const inFlight = 4096
	for i := range b.N {
		var opts []jetstream.PublishOpt
		if withIDs {
			opts = append(opts, jetstream.WithMsgID(ids[i]))
		}
		if _, err := js.PublishAsync(subj, body, opts...); err != nil {
			b.Fatal(err)
		}
		if i%inFlight == inFlight-1 {
			waitAcks(b, js)
		}
	}
	waitAcks(b, js)
	b.StopTimer()
	after := heapNow()
	runtime.KeepAlive(ids) // in both heaps: the difference is the server's
	info, err := js.Stream(ctx, sc.Name)
	if err != nil {
		b.Fatal(err)
	}
	if got := info.CachedInfo().State.Msgs; got != uint64(b.N) {
		b.Fatalf("the stream holds %d messages, want %d", got, b.N)
	}
	n := float64(b.N)
	b.ReportMetric(float64(after.bytes-before.bytes)/n, "heap_B/msg")
	b.ReportMetric(float64(after.objects-before.objects)/n, "objects/msg")
}

type heapState struct{ bytes, objects int64 }

// heapNow is the live heap after a collection.
func heapNow() heapState {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return heapState{int64(m.HeapAlloc), int64(m.HeapObjects)}
}

func waitAcks(b *testing.B, js jetstream.JetStream) {
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		b.Fatal("publishes not acknowledged in 30s")
	}
}
