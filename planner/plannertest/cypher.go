package plannertest

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A checker for the openCypher the cypher format writes: a lexer for
// the whole openCypher token set the format can produce (comments,
// string literals with every escape the grammar defines, backquoted
// names, numbers, identifiers, punctuation), then a parser for the
// statement shape:
//
//	statement = { merge } "RETURN" int "AS" name "," int "AS" name ";"
//	merge     = "MERGE" node-or-rel "SET" item { "," item }
//	item      = var ":" name | var "+=" map
//	value     = string | number | true | false | null | "[" values "]" | "datetime" "(" string ")"
//
// Strict where the grammar is lenient: no raw control characters inside
// literals or names, no empty backquoted names.

// needsUnicodeEscape: the characters the formats always escape (C0 and
// C1 controls, DEL, U+2028/2029, BOM); raw, they are an error here.
func needsUnicodeEscape(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r < 0xa0) || r == 0x2028 || r == 0x2029 || r == 0xfeff
}

type cyTok struct {
	kind string // str, name (backquoted), ident, num, punct
	text string // decoded value for str and name
}

func lexCypher(src string) ([]cyTok, error) {
	if !utf8.ValidString(src) {
		return nil, fmt.Errorf("invalid UTF-8")
	}
	var toks []cyTok
	i := 0
	for i < len(src) {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case strings.HasPrefix(src[i:], "//"):
			end := strings.IndexByte(src[i:], '\n')
			if end < 0 {
				return nil, fmt.Errorf("comment at %d not ended by a newline", i)
			}
			i += end + 1
		case strings.HasPrefix(src[i:], "/*"):
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				return nil, fmt.Errorf("unterminated block comment at %d", i)
			}
			i += end + 4
		case c == '\'' || c == '"':
			s, n, err := lexString(src[i:])
			if err != nil {
				return nil, fmt.Errorf("string at %d: %w", i, err)
			}
			toks = append(toks, cyTok{"str", s})
			i += n
		case c == '`':
			var b strings.Builder
			j := i + 1
			for {
				k := strings.IndexByte(src[j:], '`')
				if k < 0 {
					return nil, fmt.Errorf("unterminated backquoted name at %d", i)
				}
				b.WriteString(src[j : j+k])
				j += k + 1
				if j < len(src) && src[j] == '`' { // doubled: a literal backquote
					b.WriteByte('`')
					j++
					continue
				}
				break
			}
			name := b.String()
			if name == "" {
				return nil, fmt.Errorf("empty backquoted name at %d", i)
			}
			for _, r := range name {
				if needsUnicodeEscape(r) {
					return nil, fmt.Errorf("control character %U in backquoted name at %d", r, i)
				}
			}
			toks = append(toks, cyTok{"name", name})
			i = j
		case c >= '0' && c <= '9' || c == '-' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9' && prevAllowsSign(toks):
			j := i + 1
			for j < len(src) && strings.IndexByte("0123456789.eE-", src[j]) >= 0 {
				j++
			}
			if _, err := strconv.ParseFloat(src[i:j], 64); err != nil {
				return nil, fmt.Errorf("number %q at %d", src[i:j], i)
			}
			toks = append(toks, cyTok{"num", src[i:j]})
			i = j
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i + 1
			for j < len(src) && (src[j] == '_' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' || src[j] >= '0' && src[j] <= '9') {
				j++
			}
			toks = append(toks, cyTok{"ident", src[i:j]})
			i = j
		case strings.HasPrefix(src[i:], "+="):
			toks = append(toks, cyTok{"punct", "+="})
			i += 2
		case strings.IndexByte("()[]{}:,;->", c) >= 0:
			toks = append(toks, cyTok{"punct", string(c)})
			i++
		default:
			r, _ := utf8.DecodeRuneInString(src[i:])
			return nil, fmt.Errorf("stray %q at %d", r, i)
		}
	}
	return toks, nil
}

// prevAllowsSign: a '-' starts a negative number only where a value may
// stand (after ':', ',' or '['), not inside a relationship arrow.
func prevAllowsSign(toks []cyTok) bool {
	if len(toks) == 0 {
		return false
	}
	t := toks[len(toks)-1]
	return t.kind == "punct" && (t.text == ":" || t.text == "," || t.text == "[")
}

// cypherEscapes are openCypher's single-character escapes.
var cypherEscapes = map[byte]byte{
	'\\': '\\', '\'': '\'', '"': '"', 'b': '\b', 'B': '\b', 'f': '\f', 'F': '\f',
	'n': '\n', 'N': '\n', 'r': '\r', 'R': '\r', 't': '\t', 'T': '\t',
}

// lexString decodes an openCypher string literal at the start of s and
// returns it and the bytes it took.
func lexString(s string) (string, int, error) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == rune(q):
			return b.String(), i + 1, nil
		case r == '\\':
			if i+1 >= len(s) {
				return "", 0, fmt.Errorf("dangling backslash")
			}
			e := s[i+1]
			if c, ok := cypherEscapes[e]; ok {
				b.WriteByte(c)
				i += 2
				continue
			}
			switch e {
			case 'u', 'U':
				w := 4
				if e == 'U' {
					w = 8
				}
				if i+2+w > len(s) {
					return "", 0, fmt.Errorf("short \\%c escape", e)
				}
				v, err := strconv.ParseUint(s[i+2:i+2+w], 16, 32)
				if err != nil || !utf8.ValidRune(rune(v)) {
					return "", 0, fmt.Errorf("bad \\%c escape %q", e, s[i+2:i+2+w])
				}
				b.WriteRune(rune(v))
				i += 2 + w
			default:
				return "", 0, fmt.Errorf("unknown escape \\%c", e)
			}
		case needsUnicodeEscape(r):
			return "", 0, fmt.Errorf("raw control character %U", r)
		default:
			b.WriteRune(r)
			i += n
		}
	}
	return "", 0, fmt.Errorf("unterminated")
}

// CypherStatement is what the parser saw: the nodes and relationships
// with their labels, types and property maps. Property values are
// string, float64, bool, nil, []any or CypherDateTime.
type CypherStatement struct {
	Nodes []CypherNode
	Rels  []CypherRel
	// Return is the RETURN clause's node and edge counts.
	Return [2]int
}

// CypherNode is one MERGE of a node: its variable, merge id, labels
// (CtxNode first) and the properties its SET gave it.
type CypherNode struct {
	Var    string
	ID     string
	Labels []string
	Props  map[string]any
}

// CypherRel is one MERGE of a relationship between two bound nodes.
type CypherRel struct {
	Var, From, To, Type, ID string
	Props                   map[string]any
}

type cyParser struct {
	toks []cyTok
	pos  int
	vars map[string]bool
}

// ParseCypher checks src as the cypher format's openCypher and returns
// what it declares.
func ParseCypher(src string) (*CypherStatement, error) {
	toks, err := lexCypher(src)
	if err != nil {
		return nil, err
	}
	p := &cyParser{toks: toks, vars: map[string]bool{}}
	st := &CypherStatement{}
	for p.peekIdent("MERGE") {
		if err := p.merge(st); err != nil {
			return nil, fmt.Errorf("token %d: %w", p.pos, err)
		}
	}
	if err := p.ret(st); err != nil {
		return nil, fmt.Errorf("token %d: %w", p.pos, err)
	}
	if p.pos != len(p.toks) {
		return nil, fmt.Errorf("trailing tokens after ';': %v", p.toks[p.pos:])
	}
	return st, nil
}

func (p *cyParser) next() (cyTok, error) {
	if p.pos >= len(p.toks) {
		return cyTok{}, fmt.Errorf("unexpected end")
	}
	t := p.toks[p.pos]
	p.pos++
	return t, nil
}

func (p *cyParser) peekIdent(s string) bool {
	return p.pos < len(p.toks) && p.toks[p.pos].kind == "ident" && p.toks[p.pos].text == s
}

func (p *cyParser) expect(kind, text string) error {
	t, err := p.next()
	if err != nil {
		return err
	}
	if t.kind != kind || t.text != text {
		return fmt.Errorf("got %s %q, want %s %q", t.kind, t.text, kind, text)
	}
	return nil
}

func (p *cyParser) variable() (string, error) {
	t, err := p.next()
	if err != nil {
		return "", err
	}
	if t.kind != "ident" {
		return "", fmt.Errorf("got %s %q, want a variable", t.kind, t.text)
	}
	return t.text, nil
}

// schemaName is a label or relationship type: an identifier or a
// backquoted name.
func (p *cyParser) schemaName() (string, error) {
	t, err := p.next()
	if err != nil {
		return "", err
	}
	if t.kind != "ident" && t.kind != "name" {
		return "", fmt.Errorf("got %s %q, want a label or type", t.kind, t.text)
	}
	return t.text, nil
}

func (p *cyParser) merge(st *CypherStatement) error {
	p.pos++ // MERGE
	if err := p.expect("punct", "("); err != nil {
		return err
	}
	v, err := p.variable()
	if err != nil {
		return err
	}
	t, err := p.next()
	if err != nil {
		return err
	}
	switch t.text {
	case ":": // node: (v:CtxNode {id: '…'})
		if l, err := p.schemaName(); err != nil || l != "CtxNode" {
			return fmt.Errorf("node label %q (%v), want CtxNode", l, err)
		}
		m, err := p.mapLit()
		if err != nil {
			return err
		}
		if err := p.expect("punct", ")"); err != nil {
			return err
		}
		id, ok := m["id"].(string)
		if !ok || len(m) != 1 {
			return fmt.Errorf("node merge key %v, want {id: string}", m)
		}
		if p.vars[v] {
			return fmt.Errorf("variable %s bound twice", v)
		}
		p.vars[v] = true
		n := CypherNode{Var: v, ID: id, Labels: []string{"CtxNode"}, Props: map[string]any{}}
		if err := p.set(v, &n.Labels, n.Props); err != nil {
			return err
		}
		st.Nodes = append(st.Nodes, n)
	case ")": // relationship: (a)-[r:T {id: '…'}]->(b)
		if !p.vars[v] {
			return fmt.Errorf("unbound variable %s", v)
		}
		for _, s := range []string{"-", "["} {
			if err := p.expect("punct", s); err != nil {
				return err
			}
		}
		r, err := p.variable()
		if err != nil {
			return err
		}
		if err := p.expect("punct", ":"); err != nil {
			return err
		}
		typ, err := p.schemaName()
		if err != nil {
			return err
		}
		m, err := p.mapLit()
		if err != nil {
			return err
		}
		id, ok := m["id"].(string)
		if !ok || len(m) != 1 {
			return fmt.Errorf("relationship merge key %v, want {id: string}", m)
		}
		for _, s := range []string{"]", "-", ">", "("} {
			if err := p.expect("punct", s); err != nil {
				return err
			}
		}
		to, err := p.variable()
		if err != nil {
			return err
		}
		if !p.vars[to] {
			return fmt.Errorf("unbound variable %s", to)
		}
		if err := p.expect("punct", ")"); err != nil {
			return err
		}
		if p.vars[r] {
			return fmt.Errorf("variable %s bound twice", r)
		}
		p.vars[r] = true
		rel := CypherRel{Var: r, From: v, To: to, Type: typ, ID: id, Props: map[string]any{}}
		var labels []string
		if err := p.set(r, &labels, rel.Props); err != nil {
			return err
		}
		if len(labels) > 0 {
			return fmt.Errorf("labels set on relationship %s", r)
		}
		st.Rels = append(st.Rels, rel)
	default:
		return fmt.Errorf("got %q after the variable", t.text)
	}
	return nil
}

// set parses "SET item, item" for variable v.
func (p *cyParser) set(v string, labels *[]string, props map[string]any) error {
	if err := p.expect("ident", "SET"); err != nil {
		return err
	}
	for {
		if err := p.expect("ident", v); err != nil {
			return err
		}
		t, err := p.next()
		if err != nil {
			return err
		}
		switch t.text {
		case ":":
			l, err := p.schemaName()
			if err != nil {
				return err
			}
			*labels = append(*labels, l)
		case "+=":
			m, err := p.mapLit()
			if err != nil {
				return err
			}
			for k, val := range m {
				props[k] = val
			}
		default:
			return fmt.Errorf("set item %q", t.text)
		}
		if p.pos < len(p.toks) && p.toks[p.pos].text == "," && p.toks[p.pos].kind == "punct" {
			p.pos++
			continue
		}
		return nil
	}
}

func (p *cyParser) mapLit() (map[string]any, error) {
	if err := p.expect("punct", "{"); err != nil {
		return nil, err
	}
	m := map[string]any{}
	for {
		k, err := p.variable()
		if err != nil {
			return nil, err
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("key %s twice", k)
		}
		if err := p.expect("punct", ":"); err != nil {
			return nil, err
		}
		v, err := p.value()
		if err != nil {
			return nil, fmt.Errorf("value of %s: %w", k, err)
		}
		m[k] = v
		t, err := p.next()
		if err != nil {
			return nil, err
		}
		if t.text == "}" {
			return m, nil
		}
		if t.text != "," {
			return nil, fmt.Errorf("got %q in a map", t.text)
		}
	}
}

// CypherDateTime is a datetime('…') call's argument.
type CypherDateTime string

func (p *cyParser) value() (any, error) {
	t, err := p.next()
	if err != nil {
		return nil, err
	}
	switch {
	case t.kind == "str":
		return t.text, nil
	case t.kind == "num":
		return strconv.ParseFloat(t.text, 64)
	case t.kind == "ident" && (t.text == "true" || t.text == "false"):
		return t.text == "true", nil
	case t.kind == "ident" && t.text == "null":
		return nil, nil
	case t.kind == "ident" && t.text == "datetime":
		if err := p.expect("punct", "("); err != nil {
			return nil, err
		}
		s, err := p.next()
		if err != nil || s.kind != "str" {
			return nil, fmt.Errorf("datetime argument %v", s)
		}
		if err := p.expect("punct", ")"); err != nil {
			return nil, err
		}
		return CypherDateTime(s.text), nil
	case t.kind == "punct" && t.text == "[":
		var list []any
		if p.pos < len(p.toks) && p.toks[p.pos].text == "]" {
			p.pos++
			return list, nil
		}
		for {
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			list = append(list, v)
			t, err := p.next()
			if err != nil {
				return nil, err
			}
			if t.text == "]" {
				return list, nil
			}
			if t.text != "," {
				return nil, fmt.Errorf("got %q in a list", t.text)
			}
		}
	}
	return nil, fmt.Errorf("unexpected %s %q", t.kind, t.text)
}

func (p *cyParser) ret(st *CypherStatement) error {
	if err := p.expect("ident", "RETURN"); err != nil {
		return err
	}
	for i, name := range []string{"nodes", "edges"} {
		t, err := p.next()
		if err != nil || t.kind != "num" {
			return fmt.Errorf("RETURN count %v", t)
		}
		st.Return[i], _ = strconv.Atoi(t.text)
		if err := p.expect("ident", "AS"); err != nil {
			return err
		}
		if err := p.expect("ident", name); err != nil {
			return err
		}
		sep := ","
		if i == 1 {
			sep = ";"
		}
		if err := p.expect("punct", sep); err != nil {
			return err
		}
	}
	return nil
}
