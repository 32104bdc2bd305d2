package session_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/session"
)

func newManager(t *testing.T, dir string) (*session.Manager, *particle.Store) {
	t.Helper()
	o := particle.DefaultOptions(dir)
	o.SyncWrites = false
	s, err := particle.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return session.NewManager(s, 4, 0.5), s
}

func norm(v []float32) float64 {
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	return math.Sqrt(ss)
}

func TestSessionLifecycle(t *testing.T) {
	dir := t.TempDir()
	m, s := newManager(t, dir)
	ctx := context.Background()
	var pushed []*session.Session
	m.OnChange(func(s *session.Session) { pushed = append(pushed, s) })

	created, err := m.Create(ctx, session.Session{ID: "shift-1", Goals: []string{"stack cubes"}})
	if err != nil {
		t.Fatal(err)
	}
	if created.Namespace != particle.DefaultNamespace || len(created.ContextStateVector) != 4 || created.Tools == nil {
		t.Errorf("created = %+v", created)
	}
	if _, err := m.Create(ctx, session.Session{ID: "shift-1"}); !errors.Is(err, session.ErrInvalid) {
		t.Errorf("duplicate id: %v", err)
	}
	for _, bad := range []string{"a.b", "a b", "a/b", "a>"} {
		if _, err := m.Create(ctx, session.Session{ID: bad}); !errors.Is(err, session.ErrInvalid) {
			t.Errorf("id %q accepted: %v", bad, err)
		}
	}
	if _, err := m.Create(ctx, session.Session{ID: "nan", ContextStateVector: []float32{1, float32(math.NaN()), 0, 0}}); !errors.Is(err, session.ErrInvalid) {
		t.Errorf("NaN state accepted: %v", err)
	}

	tools := []string{"gripper"}
	up, err := m.Update(ctx, "", "shift-1", session.Patch{Tools: &tools, Vector: []float32{1, 0, 0, 0}})
	if err != nil {
		t.Fatal(err)
	}
	if up.Tools[0] != "gripper" || up.Goals[0] != "stack cubes" || up.StateUpdates != 1 || math.Abs(norm(up.ContextStateVector)-1) > 1e-5 {
		t.Errorf("updated = %+v", up)
	}
	if _, err := m.Update(ctx, "", "shift-1", session.Patch{Vector: []float32{1, 2}}); !errors.Is(err, session.ErrInvalid) {
		t.Errorf("wrong-dimension vector accepted: %v", err)
	}
	// Blending moves the state toward the evidence and keeps it unit.
	before := up.ContextStateVector
	bl, err := m.Blend(ctx, "", "shift-1", [][]float32{{0, 1, 0, 0}}, []float64{1})
	if err != nil {
		t.Fatal(err)
	}
	if bl.ContextStateVector[1] <= before[1] || math.Abs(norm(bl.ContextStateVector)-1) > 1e-5 || bl.StateUpdates != 2 {
		t.Errorf("blend: %v -> %v", before, bl.ContextStateVector)
	}
	if _, err := m.Get(ctx, "", "nope"); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("unknown session: %v", err)
	}
	if len(pushed) != 3 {
		t.Errorf("%d change notifications, want 3 (create, update, blend)", len(pushed))
	}

	// Another manager over the reopened store reads what was stored.
	s.Close()
	m2, _ := newManager(t, dir)
	got, err := m2.Get(ctx, "", "shift-1")
	if err != nil || got.StateUpdates != 2 || got.Tools[0] != "gripper" {
		t.Fatalf("after reopen: %+v, %v", got, err)
	}
	list, err := m2.List(ctx, "")
	if err != nil || len(list) != 1 {
		t.Errorf("list = %d sessions, %v", len(list), err)
	}
}
