package engine

import (
	"context"
	"slices"
	"testing"

	"github.com/strata-inference/strata/golden"
)

// run submits one request, drains the engine, and returns its tokens and
// the logits of every position it computed.
func runOne(t *testing.T, e *Engine, r Request) ([]int32, map[int][]float32) {
	t.Helper()
	got := map[int][]float32{}
	r.OnLogits = capture(got)
	s, err := e.Submit(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, e)
	toks, _ := collect(t, s)
	return toks, got
}

// TestPrefixMultiTurn: each turn of a conversation extends the last; with
// the prefix cache the later turns restore the earlier state instead of
// recomputing it, and produce the same tokens and logits as without it.
func TestPrefixMultiTurn(t *testing.T) {
	for _, name := range []string{"deepseek-v4/tiny", "../../models/strata-kjv"} {
		t.Run(name, func(t *testing.T) {
			m := loadModel(t, name)
			align := m.PrefixAlign()
			mk := func(off bool) *Engine {
				e, err := New(m, Config{MaxBatchTokens: 64, Pages: 800, EOS: -1, NoPrefixCache: off})
				if err != nil {
					t.Fatal(err)
				}
				return e
			}
			cached, plain := mk(false), mk(true)
			V := m.VocabSize()
			conv := prompt(align+9, 3, V) // not a multiple of align
			var hits []int64
			for turn := range 3 {
				r := Request{Prompt: slices.Clone(conv), MaxTokens: align/2 + 5}
				before := cached.Stats().PrefixHitTokens
				a, la := runOne(t, cached, r)
				b, lb := runOne(t, plain, r)
				hits = append(hits, cached.Stats().PrefixHitTokens-before)
				if !slices.Equal(a, b) {
					t.Fatalf("turn %d: with prefix cache %v, without %v", turn, a, b)
				}
				// The cached run computes only the positions after its hit.
				for p, want := range lb {
					got, ok := la[p]
					if !ok {
						if int64(p) >= hits[turn] {
							t.Fatalf("turn %d: position %d after the hit was not computed", turn, p)
						}
						continue
					}
					if d := golden.MaxAbsDiff(got, want); d != 0 { // batch-invariant kernels: bit for bit
						t.Fatalf("turn %d position %d: logits differ by %g", turn, p, d)
					}
				}
				// Next turn: the whole conversation so far plus a new message.
				conv = append(append(conv, a...), prompt(7+turn, 10+turn, V)...)
			}
			if hits[0] != 0 || hits[1] == 0 || hits[2] <= hits[1] {
				t.Fatalf("prefix tokens hit per turn %v: want none, then growing hits", hits)
			}
			for i, h := range hits {
				if h%int64(align) != 0 {
					t.Fatalf("turn %d hit %d tokens, not a multiple of %d", i, h, align)
				}
			}
			if plain.Stats().PrefixHitTokens != 0 {
				t.Fatal("the engine without prefix cache reported hits")
			}
		})
	}
}

// TestPrefixSharedSystemPrompt: requests share a long system prompt that ends
// mid-window and differ after it; the second request snapshots at the
// deepest aligned position it shares with the first, later ones hit there.
func TestPrefixSharedSystemPrompt(t *testing.T) {
	m := loadModel(t, "deepseek-v4/tiny")
	align := m.PrefixAlign()
	V := m.VocabSize()
	system := prompt(5*align+7, 1, V)
	e, _ := New(m, Config{MaxBatchTokens: 64, Pages: 800, EOS: -1})
	plain, _ := New(m, Config{MaxBatchTokens: 64, Pages: 800, EOS: -1, NoPrefixCache: true})
	var hits []int64
	for i := range 4 {
		p := append(slices.Clone(system), prompt(11+i, 40+i, V)...)
		before := e.Stats().PrefixHitTokens
		a, _ := runOne(t, e, Request{Prompt: p, MaxTokens: 6})
		b, _ := runOne(t, plain, Request{Prompt: p, MaxTokens: 6})
		if !slices.Equal(a, b) {
			t.Fatalf("request %d: with prefix cache %v, without %v", i, a, b)
		}
		hits = append(hits, e.Stats().PrefixHitTokens-before)
	}
	shared := int64(len(system) / align * align) // the hit falls back to the aligned position
	if hits[0] != 0 || hits[1] != 0 || hits[2] != shared || hits[3] != shared {
		t.Fatalf("hits %v, want 0, 0, %d, %d", hits, shared, shared)
	}
}

// TestPrefixEviction: a pool too small to keep every snapshot evicts the
// least recently used ones and still serves every request.
func TestPrefixEviction(t *testing.T) {
	m := loadModel(t, "deepseek-v4/tiny")
	probe := smallEngine(t, m, 10, 8)
	e := smallEngine(t, m, probe.PagesFor(100)*3, 32)
	V := m.VocabSize()
	for i := range 12 {
		s, err := e.Submit(context.Background(), Request{Prompt: prompt(40+3*i, i, V), MaxTokens: 30})
		if err != nil {
			t.Fatal(err)
		}
		drain(t, e)
		if toks, _ := collect(t, s); len(toks) != 30 {
			t.Fatalf("request %d: %d tokens", i, len(toks))
		}
	}
	st := e.Stats()
	if st.PagesFree+st.PrefixPages != st.PagesTotal {
		t.Fatalf("pages: %d free, %d in snapshots, %d total", st.PagesFree, st.PrefixPages, st.PagesTotal)
	}
	if st.PrefixSnapshots == 0 || st.PrefixPages > st.PagesTotal {
		t.Fatalf("%d snapshots in %d pages", st.PrefixSnapshots, st.PrefixPages)
	}
}
