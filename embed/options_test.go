package embed

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name     string
		opts     Options
		wantType string
		wantDims int
		wantErrs []string
	}{
		{name: "defaults", opts: DefaultOptions(), wantType: "hash", wantDims: 384},
		{name: "zero value", opts: Options{}, wantType: "hash", wantDims: 384},
		{name: "hash 64", opts: Options{Provider: " Hash ", Dimensions: 64}, wantType: "hash", wantDims: 64},
		{name: "hash ignores openai fields", opts: Options{Provider: "hash", BaseURL: "::bad", Model: ""}, wantType: "hash", wantDims: 384},
		{
			name:     "openai",
			opts:     Options{Provider: "openai", Model: "text-embedding-3-small", Dimensions: 256, BaseURL: "http://localhost:8080"},
			wantType: "openai", wantDims: 256,
		},
		{name: "openai needs a model", opts: Options{Provider: "openai"}, wantErrs: []string{"Model is required"}},
		{
			name: "every problem reported",
			opts: Options{Provider: "bert", Dimensions: -1, Timeout: -time.Second, BatchSize: -2},
			wantErrs: []string{
				`unknown Provider "bert"`, "Dimensions must be in [1, 65536], got -1",
				"Timeout must not be negative", "BatchSize must not be negative",
			},
		},
		{
			name:     "openai problems together",
			opts:     Options{Provider: "openai", Dimensions: 1 << 20, BaseURL: "ftp://x"},
			wantErrs: []string{"Model is required", "Dimensions must be in", `BaseURL "ftp://x"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(tc.opts)
			if len(tc.wantErrs) > 0 {
				if err == nil {
					t.Fatalf("New = %T, want error", e)
				}
				for _, w := range tc.wantErrs {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				if n := len(strings.Split(err.Error(), "\n")); n != len(tc.wantErrs) {
					t.Errorf("error has %d lines, want %d:\n%v", n, len(tc.wantErrs), err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if e.Dimensions() != tc.wantDims {
				t.Errorf("Dimensions = %d, want %d", e.Dimensions(), tc.wantDims)
			}
			switch e.(type) {
			case *Hashing:
				if tc.wantType != "hash" {
					t.Errorf("got *Hashing, want %s", tc.wantType)
				}
			case *OpenAI:
				if tc.wantType != "openai" {
					t.Errorf("got *OpenAI, want %s", tc.wantType)
				}
			default:
				t.Errorf("unexpected type %T", e)
			}
		})
	}
}

func TestErrorsArePrefixed(t *testing.T) {
	for _, err := range []error{ErrEmptyText, ErrDimension, ErrInvalid, ErrProvider} {
		if !strings.HasPrefix(err.Error(), "embed: ") {
			t.Errorf("%q lacks the package prefix", err)
		}
		if errors.Is(err, ErrProvider) != (err == ErrProvider) {
			t.Errorf("%q matches ErrProvider", err)
		}
	}
}
