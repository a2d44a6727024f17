package engine

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/model/gemma4"
	"github.com/strata-inference/strata/plan"
	"github.com/strata-inference/strata/safetensors"
)

func loadGemma4(t *testing.T, dir string, dt cache.DType) *gemma4.Model {
	t.Helper()
	m, err := gemma4.LoadWith(dir, cpu.New(0), model.Options{CacheDType: dt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestGemma4BatchedGolden: the Gemma 4 case's decode and chunked paths and
// its greedy continuation as concurrent requests through the scheduler,
// first come first served and latency-scheduled, in a pool that forces a
// preemption, each request checked against the reference.
func TestGemma4BatchedGolden(t *testing.T) {
	m := loadGemma4(t, caseDir("gemma4/tiny"), cache.F32)
	c, err := golden.Load(caseDir("gemma4/tiny"))
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []time.Duration{0, 100 * time.Millisecond} {
		rep, err := CheckBatched(context.Background(), m, c, BatchedOptions{StepTarget: target})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rep.Requests {
			t.Logf("step target %v: %s", target, r)
			if !r.OK() {
				t.Errorf("step target %v: %s", target, r)
			}
		}
		if rep.Preemptions == 0 || rep.MaxBatchSeqs < 2 || rep.PagesLeft != 0 {
			t.Errorf("step target %v: %d preemptions, at most %d sequences per step, %d pages left", target, rep.Preemptions, rep.MaxBatchSeqs, rep.PagesLeft)
		}
	}
}

// TestGemma4NgramSpeculation: greedy decoding with n-gram drafts verified
// in one pass equals plain greedy decoding token for token, with the same
// logits bit for bit, alone and batched, with f32 and bf16 caches. The
// drafts (up to 8) are both accepted and rejected, so rollbacks restore
// window-ring slots across the 24-slot ring's wrap.
func TestGemma4NgramSpeculation(t *testing.T) {
	c, err := golden.Load(caseDir("gemma4/tiny"))
	if err != nil {
		t.Fatal(err)
	}
	prompts := [][]int32{
		append(slices.Clone(c.InputIDs[:30]), c.InputIDs[:30]...), // repeats: n-gram drafts
		append(slices.Clone(c.InputIDs[40:55]), c.InputIDs[40:55]...),
	}
	for _, dt := range []cache.DType{cache.F32, cache.BF16} {
		m := loadGemma4(t, caseDir("gemma4/tiny"), dt)
		run := func(method string, batch bool) ([][]int32, []map[int][]float32, Stats) {
			e, err := New(m, Config{MaxBatchTokens: 64, Pages: 4000, PageBytes: 256, EOS: -1, NoPrefixCache: true,
				Speculation: Speculation{Method: method, MaxDraft: 8, Fixed: true}})
			if err != nil {
				t.Fatal(err)
			}
			outs := make([][]int32, len(prompts))
			lgs := make([]map[int][]float32, len(prompts))
			var streams []*Stream
			for i, p := range prompts {
				lgs[i] = map[int][]float32{}
				s, err := e.Submit(context.Background(), Request{Prompt: p, MaxTokens: 90, OnLogits: capture(lgs[i])})
				if err != nil {
					t.Fatal(err)
				}
				if !batch {
					drain(t, e)
				}
				streams = append(streams, s)
			}
			drain(t, e)
			for i, s := range streams {
				outs[i], _ = collect(t, s)
			}
			return outs, lgs, e.Stats()
		}
		want, wantL, _ := run("", false)
		for _, batch := range []bool{false, true} {
			got, gotL, st := run(SpecNgram, batch)
			for i := range prompts {
				if !slices.Equal(got[i], want[i]) {
					t.Fatalf("%v batch=%v prompt %d: %v\nplain: %v", dt, batch, i, got[i], want[i])
				}
				for p, w := range wantL[i] {
					if d := golden.MaxAbsDiff(gotL[i][p], w); d != 0 {
						t.Fatalf("%v batch=%v prompt %d position %d: logits differ by %g", dt, batch, i, p, d)
					}
				}
			}
			t.Logf("%v batch=%v: %d verify steps, %d drafted, %d accepted", dt, batch, st.SpecSteps, st.SpecDrafted, st.SpecAccepted)
			if st.SpecAccepted == 0 || st.SpecAccepted == st.SpecDrafted {
				t.Fatalf("want both accepted and rejected drafts, got %d of %d", st.SpecAccepted, st.SpecDrafted)
			}
		}
	}
}

// TestGemma4PrefixMultiTurn: each turn of a conversation extends the last;
// with the prefix cache the later turns restore the earlier state (the
// window rings copied, the full layers' entries shared) at multiples of
// the window instead of recomputing it, and give the same tokens and
// logits bit for bit.
func TestGemma4PrefixMultiTurn(t *testing.T) {
	m := loadGemma4(t, caseDir("gemma4/tiny"), cache.F32)
	align := m.PrefixAlign()
	if align != 24 {
		t.Fatalf("prefix alignment %d, want the window, 24", align)
	}
	mk := func(off bool) *Engine {
		e, err := New(m, Config{MaxBatchTokens: 64, Pages: 800, EOS: -1, NoPrefixCache: off})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	cached, plain := mk(false), mk(true)
	V := m.VocabSize()
	conv := prompt(align+9, 3, V)
	var hits []int64
	for turn := range 4 {
		r := Request{Prompt: slices.Clone(conv), MaxTokens: align/2 + 5}
		before := cached.Stats().PrefixHitTokens
		a, la := runOne(t, cached, r)
		b, lb := runOne(t, plain, r)
		hits = append(hits, cached.Stats().PrefixHitTokens-before)
		if !slices.Equal(a, b) {
			t.Fatalf("turn %d: with prefix cache %v, without %v", turn, a, b)
		}
		for p, want := range lb {
			got, ok := la[p]
			if !ok {
				if int64(p) >= hits[turn] {
					t.Fatalf("turn %d: position %d after the hit was not computed", turn, p)
				}
				continue
			}
			if d := golden.MaxAbsDiff(got, want); d != 0 {
				t.Fatalf("turn %d position %d: logits differ by %g", turn, p, d)
			}
		}
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
}

// TestGemma4Handoff: a request prefilled by one engine and continued by
// another, each with its own copy of the model, gives exactly the tokens
// one engine gives, greedy and sampled; the state carries the window rings
// and the full layers' entries.
func TestGemma4Handoff(t *testing.T) {
	dir := caseDir("gemma4/tiny")
	mA, mB := loadGemma4(t, dir, cache.F32), loadGemma4(t, dir, cache.F32)
	p := prompt(50, 4, mA.VocabSize())
	for _, sp := range []Sampling{{}, {Temperature: 0.9, TopP: 0.9, Seed: 77}} {
		r := Request{Prompt: p, MaxTokens: 40, Sampling: sp}
		one, _ := New(mA, Config{Pages: 300, EOS: -1})
		s, _ := one.Submit(context.Background(), r)
		drain(t, one)
		want, _ := collect(t, s)

		a, _ := New(mA, Config{Pages: 300, EOS: -1})
		b, _ := New(mB, Config{Pages: 300, EOS: -1})
		r.Handoff = true
		sa, _ := a.Submit(context.Background(), r)
		drain(t, a)
		first, last, err := sa.Collect(context.Background())
		if err != nil || last.Finish != FinishHandoff {
			t.Fatalf("prefill side: %v tokens, finish %q, err %v", first, last.Finish, err)
		}
		state := written(t, last)
		sb, err := b.Resume(context.Background(), bytes.NewReader(state))
		if err != nil {
			t.Fatal(err)
		}
		drain(t, b)
		rest, _ := collect(t, sb)
		if got := append(first, rest...); !slices.Equal(got, want) {
			t.Fatalf("sampling %+v: handed off %v, one engine %v", sp, got, want)
		}
	}
	// A state from a model with another cache format is refused.
	mC := loadGemma4(t, dir, cache.BF16)
	a, _ := New(mA, Config{Pages: 300, EOS: -1})
	c, _ := New(mC, Config{Pages: 300, EOS: -1})
	sa, _ := a.Submit(context.Background(), Request{Prompt: p, MaxTokens: 3, Handoff: true})
	drain(t, a)
	_, last, _ := sa.Collect(context.Background())
	if _, err := c.Resume(context.Background(), bytes.NewReader(written(t, last))); err == nil {
		t.Fatal("a bf16-cache model resumed an f32-cache state")
	} else {
		t.Logf("refused: %v", err)
	}
}

// gemma4CacheLike12B is Gemma 4 12B's cache structure (its Hub
// config.json's layers, window, heads and head sizes) with a hidden size,
// vocabulary, MLP and query heads cut down, which the cache does not
// depend on.
const gemma4CacheLike12B = `{
  "architectures": ["Gemma4ForCausalLM"], "model_type": "gemma4_text",
  "vocab_size": 64, "hidden_size": 16, "intermediate_size": 16, "num_hidden_layers": 48,
  "num_attention_heads": 8, "num_key_value_heads": 8, "head_dim": 256,
  "global_head_dim": 512, "num_global_key_value_heads": 1, "attention_k_eq_v": true,
  "sliding_window": 1024, "num_kv_shared_layers": 0, "hidden_size_per_layer_input": 0,
  "final_logit_softcapping": 30.0, "max_position_embeddings": 262144,
  "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
    "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0}}
}`

// TestGemma4PagesMatchPlan: for a model with Gemma 4 12B's cache
// structure, the pages the engine holds for a request of n tokens equal
// what the planner predicts for the 12B preset, and both equal the count
// worked out by hand with pages of 32 KiB:
//
//	window ring: 40 sliding layers × 1024 slots of 8 × 256 × 2 (K, V)
//	             values: bf16 8192 B (4 per page), f32 16384 B (2 per page)
//	kv entries:  8 full layers × n slots of 1 × 512 values (K=V):
//	             bf16 1024 B (32 per page), f32 2048 B (16 per page)
//
// each layer's instance rounding its slots up to whole pages.
func TestGemma4PagesMatchPlan(t *testing.T) {
	const pageBytes = 32 << 10
	dir := t.TempDir()
	if err := gemma4.WriteSynthetic(dir, []byte(gemma4CacheLike12B), safetensors.BF16, 5); err != nil {
		t.Fatal(err)
	}
	preset, err := plan.Preset(plan.Gemma4_12B)
	if err != nil {
		t.Fatal(err)
	}
	pages := func(instances, slots, slotBytes int) int {
		per := pageBytes / slotBytes
		return instances * ((slots + per - 1) / per)
	}
	for _, tc := range []struct {
		dt      cache.DType
		value   int // bytes per cached value
		lengths []int
	}{
		{cache.BF16, 2, []int{1, 32, 33, 100}},
		{cache.F32, 4, []int{1, 17}},
	} {
		m := loadGemma4(t, dir, tc.dt)
		pm, err := plan.FromGemma4Config(filepath.Join(dir, "config.json"), tc.dt)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range tc.lengths {
			want := pages(40, 1024, 8*256*2*tc.value) + pages(8, n, 512*tc.value)
			if got := pm.Pages(n, pageBytes); got != want {
				t.Errorf("%v at %d tokens: plan predicts %d pages, by hand %d", tc.dt, n, got, want)
			}
			if tc.dt == cache.BF16 {
				if got := preset.Pages(n, pageBytes); got != want {
					t.Errorf("the 12B preset at %d tokens: %d pages, by hand %d", n, got, want)
				}
			}
			e, err := New(m, Config{MaxBatchTokens: 128, PageBytes: pageBytes, Pages: want + 8, EOS: -1, NoPrefixCache: true})
			if err != nil {
				t.Fatal(err)
			}
			held := -1
			if _, err := e.Submit(context.Background(), Request{Prompt: prompt(n, 1, m.VocabSize()), MaxTokens: 2, OnLogits: func(pos int, _ []float32) {
				if pos == n-1 {
					held = e.Pool().NumPages() - e.Pool().FreePages()
				}
			}}); err != nil {
				t.Fatal(err)
			}
			drain(t, e)
			if held != want {
				t.Errorf("%v at %d tokens: engine holds %d pages, by hand %d", tc.dt, n, held, want)
			}
			e.Pool().Close()
		}
	}
}
