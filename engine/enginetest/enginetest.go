// Package enginetest holds what the architectures' engine tests share:
// driving an engine to idle, collecting a stream, generating over several
// prompts with every logit row recorded, and prompts that repeat
// themselves for n-gram speculation.
package enginetest

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/engine"
	"github.com/strata-inference/strata/model"
)

// Drain steps e until it is idle, failing t on a step's error or when the
// engine does not finish.
func Drain(t testing.TB, e *engine.Engine) {
	t.Helper()
	for i := 0; !e.Idle(); i++ {
		if _, err := e.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
		if i > 100000 {
			t.Fatal("engine does not finish")
		}
	}
}

// Collect returns the stream's tokens and its last event, failing t on an
// error.
func Collect(t testing.TB, s *engine.Stream) ([]int32, engine.Event) {
	t.Helper()
	toks, last, err := s.Collect(context.Background())
	if err != nil {
		t.Fatalf("request %d: %v", s.ID, err)
	}
	return toks, last
}

// Repeating is a prompt of n tokens that repeats a random pattern of
// period tokens, with a random token every 11th position, so that n-gram
// drafts are often tried, often right and often wrong.
func Repeating(n, period, vocab int, seed uint64) []int32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	base := make([]int32, period)
	for i := range base {
		base[i] = int32(rng.IntN(vocab))
	}
	out := make([]int32, n)
	for i := range out {
		out[i] = base[i%period]
		if i%11 == 10 {
			out[i] = int32(rng.IntN(vocab)) // breaks in the pattern
		}
	}
	return out
}

// Run is what Generate returns: each request's tokens, every logit row
// computed for it by position, and the engine's stats at the end.
type Run struct {
	Tokens [][]int32
	Logits []map[int][]float32
	Stats  engine.Stats
}

// Generate runs the prompts on a new engine over m as concurrent requests
// (batch) or one after another, n tokens each, and fails t unless every
// page not held by the prefix cache is free at the end.
func Generate(t testing.TB, m model.Model, cfg engine.Config, prompts [][]int32, n int, batch bool) Run {
	t.Helper()
	e, err := engine.New(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := Run{Tokens: make([][]int32, len(prompts)), Logits: make([]map[int][]float32, len(prompts))}
	var streams []*engine.Stream
	for i, p := range prompts {
		lg := map[int][]float32{}
		r.Logits[i] = lg
		s, err := e.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: n,
			OnLogits: func(pos int, l []float32) { lg[pos] = slices.Clone(l) }})
		if err != nil {
			t.Fatal(err)
		}
		if !batch {
			Drain(t, e)
		}
		streams = append(streams, s)
	}
	Drain(t, e)
	for i, s := range streams {
		r.Tokens[i], _ = Collect(t, s)
	}
	r.Stats = e.Stats()
	if e.Pool().FreePages()+r.Stats.PrefixPages != e.Pool().NumPages() {
		t.Fatalf("%d of %d pages free after every request ended", e.Pool().FreePages(), e.Pool().NumPages())
	}
	return r
}

// SameSpecs reports whether two lists of cache kinds declare the same
// kinds: names, slot sizes, policies, tokens per slot, fixed slots and
// layers.
func SameSpecs(a, b []cache.Spec) bool {
	return slices.EqualFunc(a, b, func(x, y cache.Spec) bool {
		return x.Name == y.Name && x.SlotBytes == y.SlotBytes && x.Kind() == y.Kind() && x.TokensPerSlot == y.TokensPerSlot &&
			x.FixedSlots == y.FixedSlots && slices.Equal(x.Layers, y.Layers)
	})
}
