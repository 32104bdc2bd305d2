package particle

import (
	"encoding/json"
	"testing"
)

// FuzzPolicyEdit feeds a policy edit's rule, as an operator sends it
// (the "rule" of POST /v1/policies or ctxgraph.policy.edit), through
// decoding, validation and compilation, then asks the compiled policy
// about a small graph: nothing may panic, a valid rule must survive a
// round trip, and the same question must get the same answer.
func FuzzPolicyEdit(f *testing.F) {
	for _, s := range []string{
		`{"op":"create","rule":{"effect":"deny","roles":["visitor"],"target":{"edge_type":"assertion"}},"why":"x"}`,
		`{"op":"create","rule":{"effect":"allow","roles":["operator"],"target":{"tag":"location:kitchen lab"},"namespace":"default/default"}}`,
		`{"op":"create","rule":{"effect":"label","sensitivity":"restricted","portable":false,"target":{"scope":"*"}}}`,
		`{"op":"create","rule":{"effect":"deny","roles":["robot"],"target":{"node":"n1","edge":"e1"}}}`,
		`{"op":"update","id":"r","rule":{"effect":"allow","roles":[""],"target":{}}}`,
		`{"rule":null}`, `{}`, `[]`, `{"rule":{"effect":"teleport"}}`,
	} {
		f.Add([]byte(s))
	}
	v := newView()
	a := &Node{ID: "n1", Namespace: DefaultNamespace, Type: NodeEntity, Name: "red block", Attributes: Attributes{Tags: []string{"location:kitchen lab"}}}
	b := &Node{ID: "n2", Namespace: DefaultNamespace, Type: NodeLocation, Name: "kitchen lab"}
	e := &Edge{ID: "e1", Namespace: DefaultNamespace, Source: "n1", Target: "n2", Type: EdgeAssertion, Assertion: &Assertion{Predicate: "located_in"}}
	v.putNode(a)
	v.putNode(b)
	v.putEdge(e)
	principals := []Principal{{}, {Roles: []string{"visitor"}}, {Roles: []string{"operator", "robot"}, Agent: "ur5"}}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var req struct {
			Rule *Rule `json:"rule"`
		}
		if json.Unmarshal(raw, &req) != nil || req.Rule == nil {
			return
		}
		r := req.Rule
		if r.Validate() != nil {
			return
		}
		js, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("valid rule does not encode: %v", err)
		}
		var back Rule
		if err := json.Unmarshal(js, &back); err != nil || back.Validate() != nil {
			t.Fatalf("valid rule does not survive a round trip: %v %v\n%s", err, back.Validate(), js)
		}
		r.ID, r.Status = "r1", RuleActive
		rd := Reader{v: v, pol: compile(1, map[string]*Rule{r.ID: r})}
		for _, p := range principals {
			first := [3]bool{rd.EdgeVisible(e, p), rd.NodeVisible(a, p), rd.NodeVisible(b, p)}
			again := [3]bool{rd.EdgeVisible(e, p), rd.NodeVisible(a, p), rd.NodeVisible(b, p)}
			if first != again {
				t.Fatalf("the same question got two answers for %+v: %v, %v", p, first, again)
			}
			_ = rd.ExplainEdge(e, p)
		}
	})
}
