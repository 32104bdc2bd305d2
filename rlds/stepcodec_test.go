package rlds

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

func codecSteps() []*Step {
	conf := 0.9
	return []*Step{
		{},
		{
			Index: 7, Timestamp: time.Date(2026, 1, 1, 10, 0, 2, 500_000_001, time.UTC),
			Observation: Features{
				"state":   {DType: Float32, Shape: []int{3}, Data: []float64{0.5, -1.25, 3}},      // exact in float32
				"precise": {DType: Float32, Shape: []int{2}, Data: []float64{0.8415, 1e-40}},      // not exact: float64
				"counts":  {DType: Int64, Shape: []int{2, 2}, Data: []float64{1, -2, 1 << 40, 4}}, // 2-D
				"small":   {DType: Int32, Data: []float64{-7}},
				"mask":    {DType: Bool, Shape: []int{2}, Data: []float64{1, 0}},
				"pixels":  {DType: Uint8, Shape: []int{3}, Data: []float64{0, 128, 255}},
				"wide":    {DType: Float64, Data: []float64{1.0000000000000002}},
				"image":   {DType: Image, Encoding: "jpeg", Ref: "blob:abcd"},
				"raw":     {DType: Bytes, Bytes: []byte{0, 1, 2}},
				"text":    {DType: String, Text: []string{"pick", "", "place"}},
			},
			Action: Features{"": {DType: Float32, Shape: []int{2}, Data: []float64{0.25, 0.5}}},
			Reward: 1.5, Discount: 0.99, IsFirst: true, IsLast: true, IsTerminal: true,
			LanguageInstruction: "pick up the red block",
			Metadata:            map[string]any{"operator": "lab"},
			Annotations: &Annotations{Entities: []string{"red block"}, Events: []Event{
				{Subject: "a", Predicate: "on", Object: "b", Confidence: &conf, DenyRoles: []string{"visitor"}}}},
		},
	}
}

func TestStepCodecRoundTrip(t *testing.T) {
	for _, s := range codecSteps() {
		b, err := EncodeStep(s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeStep(b)
		if err != nil {
			t.Fatalf("step %d: %v", s.Index, err)
		}
		if !reflect.DeepEqual(got, s) {
			t.Errorf("step %d round trip:\n got %+v\nwant %+v", s.Index, got, s)
		}
		b2, _ := EncodeStep(got)
		if string(b2) != string(b) {
			t.Errorf("step %d: encoding is not deterministic", s.Index)
		}
	}
}

// TestStepCodecReadsFormat1 keeps the JSON format of earlier stores
// readable, through DecodeStep and StepView alike.
func TestStepCodecReadsFormat1(t *testing.T) {
	s := codecSteps()[1]
	js, _ := json.Marshal(s)
	v1 := append([]byte{stepFormatV1}, js...)
	got, err := DecodeStep(v1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Errorf("format 1:\n got %+v\nwant %+v", got, s)
	}
	var v StepView
	if err := v.Parse(v1); err != nil {
		t.Fatal(err)
	}
	fromView, err := v.Step()
	if err != nil || !reflect.DeepEqual(fromView, s) {
		t.Errorf("format 1 through a view: %v\n got %+v\nwant %+v", err, fromView, s)
	}
}

func TestStepViewAccessors(t *testing.T) {
	b, _ := EncodeStep(codecSteps()[1])
	var v StepView
	for range 2 { // parsing again into the same view reuses it
		if err := v.Parse(b); err != nil {
			t.Fatal(err)
		}
	}
	byName := map[string]*FeatureView{}
	for i := range v.Observation {
		byName[string(v.Observation[i].Name)] = &v.Observation[i]
	}
	if got := byName["state"].AppendFloat32(nil); !reflect.DeepEqual(got, []float32{0.5, -1.25, 3}) {
		t.Errorf("state as float32: %v", got)
	}
	if got := byName["precise"].AppendFloat32(nil); got[0] != float32(0.8415) {
		t.Errorf("precise as float32: %v", got)
	}
	if got := byName["counts"].AppendInt64(nil); !reflect.DeepEqual(got, []int64{1, -2, 1 << 40, 4}) || !reflect.DeepEqual(byName["counts"].Shape, []int{2, 2}) {
		t.Errorf("counts: %v shape %v", got, byName["counts"].Shape)
	}
	var texts []string
	byName["text"].Texts(func(s []byte) { texts = append(texts, string(s)) })
	if !reflect.DeepEqual(texts, []string{"pick", "", "place"}) {
		t.Errorf("texts %q", texts)
	}
	if string(byName["image"].Ref) != "blob:abcd" || string(v.Instruction) != "pick up the red block" || len(v.Action) != 1 {
		t.Errorf("view %+v", v)
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = v.Parse(b) }); allocs != 0 {
		t.Errorf("Parse allocates %v times per step, want 0", allocs)
	}
}

func FuzzDecodeStep(f *testing.F) {
	for _, s := range codecSteps() {
		b, _ := EncodeStep(s)
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{stepFormatV2})
	f.Add([]byte{stepFormatV1, '{', '}'})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeStep(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not marked ErrCorrupt: %v", err)
			}
			return
		}
		if s.Index < 0 {
			return // a format 1 step may carry any index; EncodeStep refuses it
		}
		b2, err := EncodeStep(s)
		if err != nil {
			return // e.g. metadata JSON cannot re-encode
		}
		s2, err := DecodeStep(b2)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		b3, _ := EncodeStep(s2)
		if string(b3) != string(b2) {
			t.Fatalf("encoding not stable:\n%x\n%x", b2, b3)
		}
	})
}
