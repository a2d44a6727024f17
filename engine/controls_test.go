package engine

import (
	"bytes"
	"context"
	"math"
	"slices"
	"testing"
)

// argmaxExcept is the greedy choice over logits plus bias with the banned
// tokens left out: the reference the sampler's controls are checked against,
// computed here from the raw logits the engine reports.
func argmaxExcept(logits []float32, bias map[int32]float32, banned ...int32) int32 {
	best, bv := int32(-1), float32(math.Inf(-1))
	for i, v := range logits {
		t := int32(i)
		if slices.Contains(banned, t) {
			continue
		}
		v += bias[t]
		if best < 0 || v > bv {
			best, bv = t, v
		}
	}
	return best
}

// TestRequestControls: stop tokens end a request, MinTokens holds them (and
// EOS) back until enough tokens are generated, and LogitBias shifts the
// greedy choice; every generated token is checked against the argmax of the
// raw logits the engine reports, with the control applied by the test.
func TestRequestControls(t *testing.T) {
	m := loadModel(t, "deepseek-v4/tiny")
	V := m.VocabSize()
	p := prompt(30, 2, V)
	run := func(eos int32, r Request) ([]int32, Event, map[int][]float32) {
		t.Helper()
		e, err := New(m, Config{Pages: 200, EOS: eos})
		if err != nil {
			t.Fatal(err)
		}
		got := map[int][]float32{}
		r.Prompt, r.OnLogits = p, capture(got)
		s, err := e.Submit(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		drain(t, e)
		toks, last := collect(t, s)
		return toks, last, got
	}
	free, _, _ := run(-1, Request{MaxTokens: 8})
	first := free[0]
	// A token that greedy decoding does not pick first, to bias towards.
	other := (first + 1) % int32(V)

	for _, tc := range []struct {
		name   string
		eos    int32
		r      Request
		n      int // tokens expected
		finish FinishReason
		banned func(i int) []int32 // tokens the i-th output token cannot be
	}{
		{"stop token", -1, Request{MaxTokens: 8, Stop: []int32{first}}, 1, FinishStop, func(int) []int32 { return nil }},
		{"stop token held by min_tokens", -1, Request{MaxTokens: 6, MinTokens: 4, Stop: []int32{first}}, 0, "",
			func(i int) []int32 {
				if i < 4 {
					return []int32{first}
				}
				return nil
			}},
		{"EOS held by min_tokens", first, Request{MaxTokens: 6, MinTokens: 6}, 6, FinishLength,
			func(int) []int32 { return []int32{first} }},
		{"EOS ignored, min_tokens holds nothing", first, Request{MaxTokens: 3, MinTokens: 3, IgnoreEOS: true}, 3, FinishLength,
			func(int) []int32 { return nil }},
		{"logit bias", -1, Request{MaxTokens: 4, Sampling: Sampling{LogitBias: map[int32]float32{other: 100, first: -100}}}, 4, FinishLength,
			func(int) []int32 { return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			toks, last, logits := run(tc.eos, tc.r)
			if tc.n > 0 && len(toks) != tc.n {
				t.Fatalf("%d tokens %v, want %d", len(toks), toks, tc.n)
			}
			if tc.finish != "" && last.Finish != tc.finish {
				t.Fatalf("finish %q, want %q", last.Finish, tc.finish)
			}
			for i, tok := range toks {
				row := logits[len(p)-1+i]
				want := argmaxExcept(row, tc.r.Sampling.LogitBias, tc.banned(i)...)
				if tok != want {
					t.Fatalf("token %d is %d, want %d (the reference argmax)", i, tok, want)
				}
			}
			if tc.r.Sampling.LogitBias != nil && toks[0] != other {
				t.Fatalf("a +100 bias on %d did not make it the first token (got %d)", other, toks[0])
			}
			if tc.r.MinTokens > 0 && slices.Contains(tc.r.Stop, first) {
				if slices.Contains(toks[:tc.r.MinTokens], first) {
					t.Fatalf("stop token %d generated within min_tokens: %v", first, toks)
				}
			}
		})
	}
}

// TestRequestControlsRejected: Submit refuses controls that cannot apply.
func TestRequestControlsRejected(t *testing.T) {
	m := loadModel(t, "deepseek-v4/tiny")
	e := smallEngine(t, m, 20, 8)
	V := int32(m.VocabSize())
	for _, r := range []Request{
		{Prompt: []int32{1}, MaxTokens: 2, MinTokens: 3},
		{Prompt: []int32{1}, MaxTokens: 2, MinTokens: -1},
		{Prompt: []int32{1}, MaxTokens: 2, Stop: []int32{V}},
		{Prompt: []int32{1}, MaxTokens: 2, Sampling: Sampling{LogitBias: map[int32]float32{V: 1}}},
		{Prompt: []int32{1}, MaxTokens: 2, Sampling: Sampling{LogitBias: map[int32]float32{0: 101}}},
		{Prompt: []int32{1}, MaxTokens: 2, Sampling: Sampling{LogitBias: map[int32]float32{0: float32(math.NaN())}}},
	} {
		if _, err := e.Submit(context.Background(), r); err == nil {
			t.Errorf("Submit(%+v) accepted", r)
		}
	}
}

// TestCachedTokensReported: the events of a request whose prompt hits the
// prefix cache report the hit (the engine's own counter moves by as much),
// and a first request reports none.
func TestCachedTokensReported(t *testing.T) {
	m := loadModel(t, "deepseek-v4/tiny")
	align := m.PrefixAlign()
	e, err := New(m, Config{MaxBatchTokens: 64, Pages: 800, EOS: -1})
	if err != nil {
		t.Fatal(err)
	}
	V := m.VocabSize()
	conv := prompt(align+9, 3, V)
	for turn := range 2 {
		before := e.Stats().PrefixHitTokens
		s, err := e.Submit(context.Background(), Request{Prompt: slices.Clone(conv), MaxTokens: align/2 + 5})
		if err != nil {
			t.Fatal(err)
		}
		drain(t, e)
		var evs []Event
		for {
			ev, err := s.Recv(context.Background())
			if err != nil {
				break
			}
			evs = append(evs, ev)
			conv = append(conv, ev.Token)
		}
		hit := int(e.Stats().PrefixHitTokens - before)
		if turn == 0 && hit != 0 || turn == 1 && hit == 0 {
			t.Fatalf("turn %d: the engine hit %d tokens; the test needs none, then some", turn, hit)
		}
		for i, ev := range evs {
			if ev.CachedTokens != hit {
				t.Fatalf("turn %d event %d: CachedTokens %d, the engine hit %d", turn, i, ev.CachedTokens, hit)
			}
		}
		conv = append(conv, prompt(7, 10, V)...)
	}
}

// TestHandoffCarriesControls: a request handed from one engine to another
// keeps its stop tokens, min_tokens, logit biases and its prefix-hit
// count: it generates what one engine generates and reports the same
// cached tokens.
func TestHandoffCarriesControls(t *testing.T) {
	mA := loadModel(t, "../../models/strata-kjv")
	mB := loadModel(t, "../../models/strata-kjv")
	p := prompt(70, 4, mA.VocabSize())
	free, _ := New(mA, Config{Pages: 300, EOS: -1})
	s, _ := free.Submit(context.Background(), Request{Prompt: p, MaxTokens: 12})
	drain(t, free)
	toks, _ := collect(t, s)
	// The third token stops the request, but not before eight tokens; the
	// fifth is biased away.
	r := Request{Prompt: p, MaxTokens: 30, Stop: []int32{toks[2]}, MinTokens: 8,
		Sampling: Sampling{LogitBias: map[int32]float32{toks[4]: -100}}}
	one, _ := New(mA, Config{Pages: 300, EOS: -1})
	s, _ = one.Submit(context.Background(), r)
	drain(t, one)
	want, wantLast := collect(t, s)

	a, _ := New(mA, Config{Pages: 300, EOS: -1})
	b, _ := New(mB, Config{Pages: 300, EOS: -1})
	r.Handoff = true
	sa, _ := a.Submit(context.Background(), r)
	drain(t, a)
	first, last, err := sa.Collect(context.Background())
	if err != nil || last.Finish != FinishHandoff {
		t.Fatalf("prefill side: finish %q, err %v", last.Finish, err)
	}
	sb, err := b.Resume(context.Background(), bytes.NewReader(written(t, last)))
	if err != nil {
		t.Fatal(err)
	}
	drain(t, b)
	rest, restLast := collect(t, sb)
	if got := append(first, rest...); !slices.Equal(got, want) || restLast.Finish != wantLast.Finish {
		t.Fatalf("handed off %v (%s), one engine %v (%s)", got, restLast.Finish, want, wantLast.Finish)
	}
	if len(want) < 8 || slices.Contains(want[:8], toks[2]) {
		t.Fatalf("min_tokens did not hold the stop token back: %v", want)
	}
	if restLast.CachedTokens != wantLast.CachedTokens {
		t.Errorf("cached tokens %d after hand-off, %d on one engine", restLast.CachedTokens, wantLast.CachedTokens)
	}
}
