package particle_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ctxgraph/ctxgraph/particle"
)

// Badger's logs are written with pwrite, a batch's entries buffered and
// written out in pieces of about 1 MiB (particle/internal/badgerfork,
// CTXGRAPH.md). A batch of several MiB of values reads back whole from
// Badger as soon as it is committed and after a reopen: with the
// commit's sync and without it, in value-log files smaller than a batch
// (a file fills and a new one starts within it) and of the default size.
func TestLogsWrittenWithPwriteReadBack(t *testing.T) {
	for _, c := range []struct {
		sync     bool
		fileSize int64
	}{{true, 1 << 20}, {false, 1 << 20}, {true, 0}, {false, 0}} {
		sync := c.sync
		t.Run(fmt.Sprintf("sync=%v/vlog_file=%d", c.sync, c.fileSize), func(t *testing.T) {
			dir := t.TempDir()
			open := func() *particle.Store {
				o := particle.DefaultOptions(dir)
				o.SyncWrites = sync
				o.ViewSnapshot = false // the reopen reads Badger, not a snapshot
				if c.fileSize > 0 {
					o.ValueLogFileSize = c.fileSize
				}
				s, err := particle.Open(o)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			emb := func(i int) []float32 {
				v := make([]float32, 384) // 1.5 KB: in the value log
				for j := range v {
					v[j] = float32((i*31+j)%97) / 97
				}
				return v
			}
			const batches, perBatch = 2, 1500 // about 2.3 MB of values a batch
			s := open()
			for b := range batches {
				if _, err := s.Update(context.Background(), func(bt *particle.Batch) error {
					for i := range perBatch {
						n, _, err := bt.Resolve(particle.DefaultNamespace, particle.NodeEntity, fmt.Sprintf("n%d-%d", b, i))
						if err != nil {
							return err
						}
						n.Embedding = emb(b*perBatch + i)
						if err := bt.PutNode(n); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			// Read back from Badger at once, before any close: every value
			// a commit wrote is in the file when the commit returns.
			rep, err := s.Check(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK() || rep.Nodes != batches*perBatch || rep.Vectors < batches*perBatch {
				t.Errorf("check before the close: %d nodes, %d vectors, problems %v", rep.Nodes, rep.Vectors, rep.Problems)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = open()
			defer s.Close()
			missing, wrong := 0, 0
			s.Read(func(r particle.Reader) {
				for b := range batches {
					for i := range perBatch {
						n := r.Lookup(particle.DefaultNamespace, particle.NodeEntity, fmt.Sprintf("n%d-%d", b, i))
						want := emb(b*perBatch + i)
						switch {
						case n == nil:
							missing++
						case len(n.Embedding) != 384 || n.Embedding[0] != want[0] || n.Embedding[383] != want[383]:
							wrong++
						}
					}
				}
			})
			if missing+wrong > 0 {
				t.Errorf("after the reopen: %d of %d nodes missing, %d with another embedding", missing, batches*perBatch, wrong)
			}
		})
	}
}
