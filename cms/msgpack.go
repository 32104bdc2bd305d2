package cms

import (
	"fmt"

	"github.com/tinylib/msgp/msgp"

	"github.com/ctxgraph/ctxgraph/rlds/mplex"
)

// A span may come as MessagePack, as the RLDS messages beside it may:
// the JSON span's object as a map under the same keys, in the forms
// rlds/mplex reads. Decode tells it from JSON by its first byte.

// decodeMsgpack reads a msgpack span, without validating it.
func decodeMsgpack(b []byte) (*Span, error) {
	d := mplex.Reader{B: b}
	var s Span
	err := d.Object(func(key string) (err error) {
		switch key {
		case "id":
			err = d.StrTo(&s.ID)
		case "level":
			s.Level, err = d.Int()
		case "period":
			err = d.StrTo(&s.Period)
		case "chunk_size":
			s.ChunkSize, err = d.Int()
		case "agent":
			err = d.StrTo(&s.Agent)
		case "episode_id":
			err = d.StrTo(&s.EpisodeID)
		case "stream_id":
			err = d.StrTo(&s.StreamID)
		case "step_start":
			err = mplex.Opt(&d, &s.StepStart, d.Int)
		case "step_end":
			err = mplex.Opt(&d, &s.StepEnd, d.Int)
		case "start":
			s.Start, err = d.Time()
		case "end":
			s.End, err = d.Time()
		case "update_index":
			s.UpdateIndex, err = d.Int()
		case "parent_id":
			err = d.StrTo(&s.ParentID)
		case "text":
			err = d.StrTo(&s.Text)
		case "embedding":
			s.Embedding, err = d.Vector()
		case "concepts":
			s.Concepts, err = d.Strs()
		case "entities":
			s.Entities, err = d.Strs()
		case "update_size":
			s.UpdateSize, err = d.Number()
		case "tenant":
			err = d.StrTo(&s.Tenant)
		case "project":
			err = d.StrTo(&s.Project)
		default:
			err = mplex.ErrUnknownKey
		}
		return err
	})
	if err == nil {
		err = d.Done()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: msgpack: %w", ErrMalformed, err)
	}
	return &s, nil
}

// AppendMsgpack appends s as a msgpack span to b: the fields its JSON
// holds, each number in its shortest exact form.
func (s *Span) AppendMsgpack(b []byte) []byte {
	w := mplex.Writer{B: b}
	w.Object(func() {
		w.Field("id", s.ID)
		w.Key("level")
		w.B = msgp.AppendInt(w.B, s.Level)
		w.OptField("period", s.Period)
		if s.ChunkSize != 0 {
			w.Key("chunk_size")
			w.B = msgp.AppendInt(w.B, s.ChunkSize)
		}
		w.OptField("agent", s.Agent)
		w.OptField("episode_id", s.EpisodeID)
		w.OptField("stream_id", s.StreamID)
		for _, f := range []struct {
			k string
			v *int
		}{{"step_start", s.StepStart}, {"step_end", s.StepEnd}} {
			if f.v != nil {
				w.Key(f.k)
				w.B = msgp.AppendInt(w.B, *f.v)
			}
		}
		w.Key("start")
		w.Time(s.Start)
		w.Key("end")
		w.Time(s.End)
		w.Key("update_index")
		w.B = msgp.AppendInt(w.B, s.UpdateIndex)
		w.OptField("parent_id", s.ParentID)
		w.OptField("text", s.Text)
		w.Vector("embedding", s.Embedding)
		w.Strs("concepts", s.Concepts)
		w.Strs("entities", s.Entities)
		w.Key("update_size")
		w.Number(s.UpdateSize)
		w.OptField("tenant", s.Tenant)
		w.OptField("project", s.Project)
	})
	return w.B
}
