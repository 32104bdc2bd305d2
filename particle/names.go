package particle

import (
	"strings"
	"unicode"

	"github.com/google/uuid"
)

// idSpace is the UUID namespace of name-derived ids. Changing it changes
// every entity id: never do.
var idSpace = uuid.MustParse("6f1c2a3e-8b7d-5c4e-9a0f-1d2e3c4b5a69")

// Canonical normalises a name: trim, collapse inner whitespace to one
// space, lowercase.
func Canonical(name string) string {
	var b strings.Builder
	b.Grow(len(name))
	space := false
	for _, r := range strings.TrimSpace(name) {
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// EntityID is the name-derived id of the node of type t named name in
// namespace ns: every writer computes the same id for the same entity.
func EntityID(ns string, t NodeType, name string) string {
	return uuid.NewSHA1(idSpace, []byte(ns+"\x00"+string(t)+"\x00"+Canonical(name))).String()
}

// EpisodeNodeID is the id of the graph node that stands for an episode.
func EpisodeNodeID(ns, episodeID string) string {
	return uuid.NewSHA1(idSpace, []byte(ns+"\x00episode\x00"+episodeID)).String()
}

// NewEdgeID returns a fresh time-ordered edge id.
func NewEdgeID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

// edgeIdentity is the key that makes an edge unique: re-observing the
// same (namespace, source, type, predicate, target) reinforces one edge.
func edgeIdentity(ns, src string, t EdgeType, pred, dst string) string {
	return ns + "\x00" + src + "\x00" + string(t) + "\x00" + Canonical(pred) + "\x00" + dst
}

// aliasKey is the key of the alias index: (namespace, type, canonical).
func aliasKey(ns string, t NodeType, name string) string {
	return ns + "\x00" + string(t) + "\x00" + Canonical(name)
}
