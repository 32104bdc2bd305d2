package rlds

import (
	"strings"
	"unicode"
)

// Parsed is what the symbolic layer reads from a language instruction:
// the goal (the whole instruction), the intent (its verb phrase) and the
// objects it names.
type Parsed struct {
	Goal    string
	Intent  string
	Objects []string
}

var (
	determiners  = set("the", "a", "an", "this", "that", "these", "those", "some", "its", "their", "your", "my", "of", "please", "then", "and", "or", "it", "them", "him", "her", "something", "everything", "all")
	prepositions = set("in", "into", "on", "onto", "to", "from", "at", "inside", "under", "over", "next", "near", "behind", "beside", "toward", "towards", "off", "out", "with", "by", "above", "below", "between", "left", "right", "top", "bottom", "front", "of", "side")
	particles    = set("up", "down", "off", "out", "over", "away", "back", "open", "closed")
)

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// ParseInstruction splits an imperative robot instruction such as "put
// the red block in the blue bowl" into intent "put" and objects "red
// block" and "blue bowl". It is a heuristic for English imperatives; an
// instruction it cannot split still yields its goal.
func ParseInstruction(s string) Parsed {
	s = strings.TrimSpace(s)
	if s == "" {
		return Parsed{}
	}
	words := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-' && r != '\''
	})
	p := Parsed{Goal: strings.Join(strings.Fields(s), " ")}
	if len(words) == 0 {
		return p
	}
	i := 0
	p.Intent = words[0]
	i = 1
	for i < len(words) && particles[words[i]] {
		p.Intent += " " + words[i]
		i++
	}
	var chunk []string
	flush := func() {
		if len(chunk) > 0 {
			p.Objects = append(p.Objects, strings.Join(chunk, " "))
			chunk = nil
		}
	}
	for ; i < len(words); i++ {
		w := words[i]
		switch {
		case prepositions[w] || particles[w]:
			flush()
		case determiners[w]:
			if w == "and" || w == "or" || w == "then" {
				flush()
				// "... and put it in ...": a second verb, not an object.
				if i+2 < len(words) && (determiners[words[i+2]] || prepositions[words[i+2]] || particles[words[i+2]]) {
					i++
				}
			}
		default:
			chunk = append(chunk, w)
		}
	}
	flush()
	return p
}
