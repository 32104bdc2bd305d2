package rlds

import (
	"fmt"
	"testing"
)

// TestMsgIDPerNamespace pins the default namespace's ids (stores hold
// them as applied) and gives every other namespace its own: the same
// episode and step in two namespaces are two messages.
func TestMsgIDPerNamespace(t *testing.T) {
	step := &Message{Kind: KindStep, EpisodeID: "ep-1", Step: &Step{Index: 7}}
	start := &Message{Kind: KindEpisodeStart, EpisodeID: "ep-1"}
	end := &Message{Kind: KindEpisodeEnd, EpisodeID: "ep-1"}
	for _, c := range []struct {
		m               *Message
		tenant, project string
		want            string
	}{
		{step, "", "", "ep-1/7"},
		{start, "", "", "ep-1/start"},
		{end, "", "", "ep-1/end"},
		{step, "default", "", "ep-1/7"},
		{step, "", "default", "ep-1/7"},
		{step, "default", "default", "ep-1/7"},
		{step, "lab-b", "", "lab-b/default.ep-1/7"},
		{start, "lab-b", "arm", "lab-b/arm.ep-1/start"},
		{end, "", "arm", "default/arm.ep-1/end"},
	} {
		m := *c.m
		m.Tenant, m.Project = c.tenant, c.project
		if got := m.MsgID(); got != c.want {
			t.Errorf("%s of tenant %q project %q: MsgID %q, want %q", m.Kind, c.tenant, c.project, got, c.want)
		}
	}
	// No two namespaces, episodes and steps share an id.
	seen := map[string]string{}
	for _, tenant := range []string{"", "a", "a.b", "lab"} {
		for _, project := range []string{"", "x", "b.x"} {
			for _, ep := range []string{"ep", "a/x", "b"} {
				for i := range 3 {
					m := Message{Kind: KindStep, EpisodeID: ep, Tenant: tenant, Project: project, Step: &Step{Index: i}}
					what := fmt.Sprintf("%s %s %s %d", tenant, project, ep, i)
					if tenant == "" {
						what = fmt.Sprintf("default %s %s %d", project, ep, i)
					}
					if project == "" {
						what = fmt.Sprintf("%s default %s %d", tenant, ep, i)
						if tenant == "" {
							what = fmt.Sprintf("default default %s %d", ep, i)
						}
					}
					if other, ok := seen[m.MsgID()]; ok && other != what {
						t.Fatalf("%s and %s share the id %q", other, what, m.MsgID())
					}
					seen[m.MsgID()] = what
				}
			}
		}
	}
}
