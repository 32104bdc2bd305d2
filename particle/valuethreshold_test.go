package particle_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/ctxgraph/ctxgraph/particle"
)

// A store written with big values in the value log reads the same when
// reopened with every value kept in the tree, and back: the threshold
// decides where new values go, never how stored ones read.
func TestValueThresholdLayoutsReadAlike(t *testing.T) {
	dir := t.TempDir()
	emb := make([]float32, 384) // 1.5 KB: over the default threshold
	for i := range emb {
		emb[i] = float32(i%7) / 7
	}
	open := func(threshold int) *particle.Store {
		o := particle.DefaultOptions(dir)
		o.SyncWrites = false
		o.ValueThreshold = threshold
		s, err := particle.Open(o)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	put := func(s *particle.Store, name string) {
		_, err := s.Update(context.Background(), func(b *particle.Batch) error {
			n, _, err := b.Resolve(particle.DefaultNamespace, particle.NodeEntity, name)
			if err != nil {
				return err
			}
			n.Embedding = emb
			return b.PutNode(n)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	check := func(s *particle.Store, names ...string) {
		t.Helper()
		s.Read(func(r particle.Reader) {
			for _, name := range names {
				n := r.Lookup(particle.DefaultNamespace, particle.NodeEntity, name)
				if n == nil || !slices.Equal(n.Embedding, emb) {
					t.Errorf("%s after reopen: %+v", name, n)
				}
			}
		})
	}
	s := open(particle.DefaultValueThreshold)
	put(s, "in the value log")
	s.Close()
	s = open(0)
	check(s, "in the value log")
	put(s, "in the tree")
	s.Close()
	s = open(particle.DefaultValueThreshold)
	defer s.Close()
	check(s, "in the value log", "in the tree")
}

func TestValueThresholdIsValidated(t *testing.T) {
	checkOptionRefused(t, "ValueThreshold", func(o *particle.Options, v int64) { o.ValueThreshold = int(v) }, -1, 1<<20+1)
}

// checkOptionRefused: Open refuses the options set (by set) to each of
// values, with an error naming the option.
func checkOptionRefused(t *testing.T, name string, set func(*particle.Options, int64), values ...int64) {
	t.Helper()
	for _, v := range values {
		o := particle.DefaultOptions(t.TempDir())
		set(&o, v)
		if s, err := particle.Open(o); err == nil || !strings.Contains(err.Error(), name) {
			if s != nil {
				s.Close()
			}
			t.Errorf("%s %d: %v", name, v, err)
		}
	}
}
