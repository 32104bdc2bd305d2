package plannertest

import (
	"strings"
	"testing"
)

// The checker must refuse what is not valid (or not what the format
// writes), or the property tests over it prove nothing.
func TestParseCypherRefusesBadInput(t *testing.T) {
	good := "// c\nMERGE (n0:CtxNode {id: 'a\\'b\\\\c\\n\\u00e9'}) SET n0:`Odd``Label`, n0 += {name: 'x', n: -1.5, l: ['a', 2], at: datetime('2026-01-01T00:00:00Z'), z: null}\n" +
		"MERGE (n0)-[r0:REL {id: 'e'}]->(n0) SET r0 += {b: true}\nRETURN 1 AS nodes, 1 AS edges;\n"
	st, err := ParseCypher(good)
	if err != nil {
		t.Fatalf("good statement refused: %v", err)
	}
	if st.Nodes[0].ID != "a'b\\c\né" || st.Nodes[0].Labels[1] != "Odd`Label" || st.Rels[0].Type != "REL" || st.Return != [2]int{1, 1} {
		t.Errorf("parsed %+v", st)
	}
	if st.Nodes[0].Props["at"] != CypherDateTime("2026-01-01T00:00:00Z") || st.Nodes[0].Props["n"] != -1.5 {
		t.Errorf("props %+v", st.Nodes[0].Props)
	}
	for name, bad := range map[string]string{
		"unescaped quote":      strings.Replace(good, `'x'`, `'x'y'`, 1),
		"raw newline":          strings.Replace(good, `'x'`, "'x\ny'", 1),
		"raw control":          strings.Replace(good, `'x'`, "'x\x01'", 1),
		"unknown escape":       strings.Replace(good, `'x'`, `'\q'`, 1),
		"short unicode escape": strings.Replace(good, `'x'`, `'\u12'`, 1),
		"unterminated string":  strings.Replace(good, `'x'`, `'x`, 1),
		"lone backquote":       strings.Replace(good, "`Odd``Label`", "`Odd`Label`", 1),
		"empty backquotes":     strings.Replace(good, "`Odd``Label`", "``", 1),
		"unbound variable":     strings.Replace(good, "(n0)-[r0", "(n9)-[r0", 1),
		"no semicolon":         strings.Replace(good, "edges;", "edges", 1),
		"trailing statement":   good + "MERGE (n1:CtxNode {id: 'b'}) SET n1 += {}",
		"stray character":      strings.Replace(good, "SET n0:", "SET n0§", 1),
		"bad number":           strings.Replace(good, "-1.5", "1.2.3", 1),
		"duplicate key":        strings.Replace(good, "{name: 'x',", "{name: 'x', name: 'y',", 1),
		"comment without end":  "// only a comment",
		"invalid UTF-8":        strings.Replace(good, "'x'", "'\xff'", 1),
	} {
		if _, err := ParseCypher(bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
