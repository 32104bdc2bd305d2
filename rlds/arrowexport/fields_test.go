package arrowexport_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds/arrowexport"
	"github.com/ctxgraph/ctxgraph/rlds/arrowexport/arrowexporttest"
)

// fill sets every field reachable from v to a non-zero value, so that a
// round trip that drops a field fails. n varies the values.
func fill(v reflect.Value, n int) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Date(2026, 1, 1, 10, 0, n, 1000*n, time.UTC)))
			return
		}
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), n+i)
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		fill(v.Index(0), n)
		fill(v.Index(1), n+1)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, n)
		if e.Kind() == reflect.Interface {
			e.Set(reflect.ValueOf("value")) // metadata holds JSON values
		} else {
			fill(e, n+1)
		}
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString("s" + string(rune('a'+n%26)))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(n + 1))
	case reflect.Uint64, reflect.Uint32, reflect.Uint8:
		v.SetUint(uint64(n + 1))
	case reflect.Float64, reflect.Float32:
		v.SetFloat(float64(n) + 0.5)
	}
}

// TestEveryFieldOfTheDataModel stores a node, an edge and an episode
// with every field set, exports them in every format and checks that
// each comes back whole: a field added to the data model without a
// column fails here.
func TestEveryFieldOfTheDataModel(t *testing.T) {
	fx := newFixture(t)
	var n particle.Node
	var e particle.Edge
	var ep particle.Episode
	for i, v := range []any{&n, &e, &ep} {
		fill(reflect.ValueOf(v).Elem(), 3*i)
	}
	ns := "full/fields"
	n.ID, n.Namespace, n.Type, n.Embedding = "node-full", ns, particle.NodeEntity, []float32{1, 2, 3}
	e.ID, e.Namespace, e.Type, e.Source, e.Target, e.Embedding = "edge-full", ns, particle.EdgeAssertion, "node-full", "node-full", []float32{4, 5}
	// Every policy field set, and still visible to the exporting operator.
	e.Policy.AllowRoles, e.Policy.DenyRoles, e.Scope.Audience = []string{"operator"}, []string{"visitor"}, []string{"operator"}
	e.Policy.Sensitivity, e.Policy.Subject, e.Policy.Origin = particle.SensitivityPublic, "someone", "somewhere"
	e.Salience.DecayFn = "exp"
	ep.ID, ep.Namespace, ep.NodeID, ep.Nodes, ep.Edges, ep.Embedding = "ep-full", ns, "node-full", []string{"node-full"}, []string{"edge-full"}, []float32{6}
	// Written as the codec writes them, read as a snapshot reads them.
	_, err := fx.st.Update(context.Background(), func(b *particle.Batch) error {
		n2, e2, ep2 := n, e, ep
		if err := b.PutNode(&n2); err != nil {
			return err
		}
		if err := b.PutEdge(&e2); err != nil {
			return err
		}
		return b.PutEpisode(&ep2)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := arrowexporttest.StoreRecords(t, fx.st, ns)
	for _, w := range []struct {
		name string
		v    any
	}{{"node", want.Nodes["node-full"]}, {"edge", want.Edges["edge-full"]}, {"episode", want.Episodes["ep-full"]}} {
		assertNoZeroField(t, w.name, reflect.ValueOf(w.v))
	}
	for _, f := range arrowexporttest.SingleFileFormats {
		for _, table := range []arrowexport.Table{arrowexport.TableNodes, arrowexport.TableEdges, arrowexport.TableEpisodes} {
			o := arrowexport.Options{Table: table}
			o.Filter.Namespace = ns
			o.Filter.Principal.Roles = []string{"operator"}
			schema, recs := arrowexporttest.Read(t, f, arrowexporttest.Export(t, fx.st, o, f))
			arrowexporttest.CheckGraph(t, table, schema, recs, want)
		}
	}
}

// assertNoZeroField fails on a zero field of v, naming its path: the
// store dropped what fill set, so the test would prove nothing about it.
func assertNoZeroField(t *testing.T, path string, v reflect.Value) {
	t.Helper()
	switch {
	case v.Kind() == reflect.Struct && v.Type() != reflect.TypeOf(time.Time{}):
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				assertNoZeroField(t, path+"."+v.Type().Field(i).Name, v.Field(i))
			}
		}
	case v.IsZero():
		t.Errorf("%s is zero after the store's round trip", path)
	}
}
