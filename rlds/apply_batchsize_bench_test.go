package rlds_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ctxgraph/ctxgraph/embed"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds"
)

// BenchmarkCommitBySize measures the daemon's commit path (apply, encode,
// Badger's commit and the view's publish) by the size of its batches,
// with fsync on (the daemon's default) and off, on the medium preset's
// fleet of 50 robots streaming at once. A batch of n messages in fleet
// order holds about n/50 steps of each episode it touches, and a batch
// writes an episode's records (its own, its nodes', its edges') once
// however many of its steps it holds: the daemon's paced batches (20-70
// messages) are the small end, its bulk pulls (2,048) the large.
//
// Each run opens a store, commits 4,096 messages in batches of 1,024 so
// that the fleet's nodes exist, then times 8,192 more in batches of n.
// Reported per message: wall time, CPU (every goroutine's, Badger's
// included), the bytes and keys written to Badger, messages per episode
// record written; and the wall time of a batch.
func BenchmarkCommitBySize(b *testing.B) {
	const warm, timed = 4096, 8192
	msgs := mediumFleet(warm + timed)
	for _, m := range msgs {
		m.NormalizeEmbeddings() // as the daemon's decoders hand them over
	}
	ctx := context.Background()
	ap := &rlds.Applier{Embedder: embed.NewHashing(384)}
	for _, sync := range []bool{true, false} {
		for _, n := range []int{4, 16, 64, 256, 1024} {
			b.Run(fmt.Sprintf("fsync=%v/batch=%d", sync, n), func(b *testing.B) {
				var cpu float64
				var bytes, keys, episodeWrites int64
				for b.Loop() {
					b.StopTimer()
					o := particle.DefaultOptions(b.TempDir())
					o.SyncWrites = sync
					s, err := particle.Open(o)
					if err != nil {
						b.Fatal(err)
					}
					commit := func(chunk []*rlds.Message, first int) {
						if _, err := s.Update(ctx, func(bt *particle.Batch) error {
							for j, m := range chunk {
								if err := ap.Apply(ctx, bt, fmt.Sprint(first+j), m); err != nil {
									return err
								}
							}
							return nil
						}); err != nil {
							b.Fatal(err)
						}
					}
					for i := 0; i < warm; i += 1024 {
						commit(msgs[i:i+1024], i)
					}
					w0, cpu0 := s.Written(), cpuSeconds()
					b.StartTimer()
					for i := warm; i < warm+timed; i += n {
						commit(msgs[i:min(i+n, warm+timed)], i)
					}
					b.StopTimer()
					cpu += cpuSeconds() - cpu0
					w := s.Written().Sub(w0)
					bytes += w.Total()
					keys += w.Keys
					episodeWrites += w.EpisodeRecords
					if err := s.Close(); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				msgsTimed := float64(timed * b.N)
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/msgsTimed, "µs/msg")
				b.ReportMetric(cpu*1e6/msgsTimed, "cpu-µs/msg")
				b.ReportMetric(float64(bytes)/msgsTimed, "B/msg")
				b.ReportMetric(float64(keys)/msgsTimed, "keys/msg")
				b.ReportMetric(msgsTimed/float64(episodeWrites), "msgs/episode-write")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e6/float64(b.N*((timed+n-1)/n)), "ms/batch")
			})
		}
	}
}
