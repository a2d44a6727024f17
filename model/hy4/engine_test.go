package hy4_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/engine"
	"github.com/strata-inference/strata/engine/enginetest"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/model/hy4"
	"github.com/strata-inference/strata/plan"
)

func tinyDir() string { return filepath.Join("..", "..", "testdata", "golden", "hy4", "tiny") }

func load(t testing.TB, dir string, o model.Options) *hy4.Model {
	t.Helper()
	m, err := hy4.Load(dir, cpu.New(0), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestSpeculativeNgram: greedy decoding with n-gram speculation equals
// plain greedy decoding token for token, and every logit row the target
// computed for a kept position equals plain decoding's bit for bit,
// alone and batched; drafts are both accepted and rejected (a rejected
// draft's latents and indexer keys are left stale past the sequence's
// length, and rewritten before anything reads them). The prompts are
// longer than index_topk, so the selection is active.
func TestSpeculativeNgram(t *testing.T) {
	m := load(t, tinyDir(), model.Options{})
	V := m.VocabSize()
	prompts := [][]int32{enginetest.Repeating(60, 7, V, 1), enginetest.Repeating(45, 5, V, 2)}
	const n = 60
	cfg := engine.Config{MaxBatchTokens: 64, Pages: 4000, PageBytes: 1024, EOS: -1, NoPrefixCache: true}
	want := enginetest.Generate(t, m, cfg, prompts, n, false)
	for _, batch := range []bool{false, true} {
		sc := cfg
		sc.Speculation = engine.Speculation{Method: engine.SpecNgram, MaxDraft: 6, Fixed: true}
		got := enginetest.Generate(t, m, sc, prompts, n, batch)
		for i := range prompts {
			if !slices.Equal(got.Tokens[i], want.Tokens[i]) {
				t.Fatalf("batch=%v prompt %d: speculative %v\nplain %v", batch, i, got.Tokens[i], want.Tokens[i])
			}
			if len(got.Logits[i]) < n {
				t.Fatalf("batch=%v prompt %d: %d logit rows", batch, i, len(got.Logits[i]))
			}
			for p, w := range want.Logits[i] {
				if d := golden.MaxAbsDiff(got.Logits[i][p], w); d != 0 {
					t.Fatalf("batch=%v prompt %d position %d: logits differ by %g", batch, i, p, d)
				}
			}
		}
		st := got.Stats
		t.Logf("batch=%v: %d verify steps, %d drafted, %d accepted", batch, st.SpecSteps, st.SpecDrafted, st.SpecAccepted)
		if st.SpecAccepted == 0 || st.SpecAccepted == st.SpecDrafted {
			t.Fatalf("want both accepted and rejected drafts, got %d of %d", st.SpecAccepted, st.SpecDrafted)
		}
	}
}

// TestPrefixHit: a second turn that extends the first reuses its whole
// state (a prefix hit at any position: the cache holds append kinds only)
// and generates exactly what an engine without prefix caching generates;
// the hit and the decoding after it copy at most the last, partly filled
// page of each layer's kinds.
func TestPrefixHit(t *testing.T) {
	m := load(t, tinyDir(), model.Options{})
	V := m.VocabSize()
	first := enginetest.Repeating(37, 9, V, 3)
	cfg := engine.Config{MaxBatchTokens: 48, Pages: 4000, PageBytes: 1024, EOS: -1}
	e, err := engine.New(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := e.Submit(context.Background(), engine.Request{Prompt: first, MaxTokens: 12})
	enginetest.Drain(t, e)
	out, _ := enginetest.Collect(t, s)
	second := append(append(slices.Clone(first), out...), enginetest.Repeating(15, 4, V, 4)...)
	copied := e.Pool().CopiedBytes()
	lg := map[int][]float32{}
	s2, _ := e.Submit(context.Background(), engine.Request{Prompt: second, MaxTokens: 10, OnLogits: func(p int, l []float32) { lg[p] = slices.Clone(l) }})
	enginetest.Drain(t, e)
	got, last := enginetest.Collect(t, s2)
	// The first turn's state at its end (all but its last token, which
	// was sampled, not fed) is the second turn's prefix.
	if want := len(first) + len(out) - 1; last.CachedTokens != want || e.Stats().PrefixHitTokens != int64(want) {
		t.Fatalf("prefix hit of %d tokens, want %d", last.CachedTokens, want)
	}
	tables := 0
	for _, sp := range m.CacheSpecs() {
		tables += len(sp.Layers)
	}
	if c := e.Pool().CopiedBytes() - copied; c > int64(tables*cfg.PageBytes) {
		t.Errorf("the hit copied %d bytes, more than one page per table (%d)", c, tables*cfg.PageBytes)
	}
	want := enginetest.Generate(t, m, engine.Config{MaxBatchTokens: 48, Pages: 4000, PageBytes: 1024, EOS: -1, NoPrefixCache: true}, [][]int32{second}, 10, false)
	if !slices.Equal(got, want.Tokens[0]) {
		t.Fatalf("after a prefix hit of %d tokens: %v, without: %v", last.CachedTokens, got, want.Tokens[0])
	}
	if len(lg) == 0 {
		t.Fatal("no logits recorded")
	}
	for p, l := range lg {
		if d := golden.MaxAbsDiff(l, want.Logits[0][p]); d != 0 {
			t.Fatalf("position %d: logits differ by %g", p, d)
		}
	}
}

// TestHandoff: a request prefilled by one engine and continued by another
// (each with its own copy of the model, as two processes would have)
// gives exactly the tokens one engine gives, greedy and sampled; a state
// is refused by a model with other weights.
func TestHandoff(t *testing.T) {
	mA := load(t, tinyDir(), model.Options{})
	mB := load(t, tinyDir(), model.Options{})
	p := enginetest.Repeating(50, 13, mA.VocabSize(), 5)
	cfg := engine.Config{Pages: 4000, PageBytes: 1024, EOS: -1}
	for _, sp := range []engine.Sampling{{}, {Temperature: 0.9, TopP: 0.9, Seed: 77}} {
		r := engine.Request{Prompt: p, MaxTokens: 30, Sampling: sp}
		one, _ := engine.New(mA, cfg)
		s, _ := one.Submit(context.Background(), r)
		enginetest.Drain(t, one)
		want, _ := enginetest.Collect(t, s)

		a, _ := engine.New(mA, cfg)
		b, _ := engine.New(mB, cfg)
		r.Handoff = true
		sa, _ := a.Submit(context.Background(), r)
		enginetest.Drain(t, a)
		firstToks, last := enginetest.Collect(t, sa)
		if last.Finish != engine.FinishHandoff || last.Handoff == nil {
			t.Fatalf("prefill side finished %q", last.Finish)
		}
		var buf bytes.Buffer
		if _, err := last.Handoff.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		state := slices.Clone(buf.Bytes())
		sb, err := b.Resume(context.Background(), &buf)
		if err != nil {
			t.Fatal(err)
		}
		enginetest.Drain(t, b)
		rest, _ := enginetest.Collect(t, sb)
		if got := append(firstToks, rest...); !slices.Equal(got, want) {
			t.Fatalf("sampling %+v: handed off %v, one engine %v", sp, got, want)
		}
		// Another checkpoint of the same shapes does not take the state.
		other := t.TempDir()
		cfgJSON, _ := os.ReadFile(filepath.Join(tinyDir(), "config.json"))
		if err := hy4.WriteSynthetic(other, cfgJSON, 9); err != nil {
			t.Fatal(err)
		}
		c, _ := engine.New(load(t, other, model.Options{}), cfg)
		if _, err := c.Resume(context.Background(), bytes.NewReader(state)); err == nil {
			t.Fatal("a model with other weights resumed the state")
		} else {
			t.Logf("other weights: %v", err)
		}
	}
}

// releasedCacheShape is a checkpoint with the released HY4's cache shapes
// (34 layers, latent 512 + RoPE 64, indexer keys of 128 on the 10 full
// layers) and tiny everything else, so that the engine's real pool use
// can be measured for the released config.
func releasedCacheShape(t testing.TB) string {
	t.Helper()
	b, err := plan.PresetConfig(plan.HY4)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	dense := make([]string, 34)
	for i := range dense {
		dense[i] = "dense"
	}
	for k, v := range map[string]any{
		"vocab_size": 64, "hidden_size": 16, "intermediate_size": 16, "num_attention_heads": 1, "num_key_value_heads": 1,
		"q_lora_rank": 8, "qk_nope_head_dim": 4, "v_head_dim": 4, "index_n_heads": 1, "mlp_layer_types": dense, "hc_mult": 2,
	} {
		cfg[k] = v
	}
	dir := t.TempDir()
	cb, _ := json.Marshal(cfg)
	if err := hy4.WriteSynthetic(dir, cb, 3); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestPoolMatchesPlan: for each cache format, the pages the engine holds
// for a request of n tokens of the released HY4's cache shapes equal what
// `strata plan` predicts for the released config, and both equal the
// count worked out by hand: in pages of 8 KiB,
//
//	latent slot: f32 576·4 = 2304 B (3 per page), bf16 1152 B (7),
//	             fp8 512 + 4·4 + 64·2 = 656 B (12)
//	key slot:    f32 128·4 = 512 B (16), bf16 256 B (32), fp8 132 B (62)
//	pages(n) = 34·⌈n/latents per page⌉ + 10·⌈n/keys per page⌉
//
// with nothing fixed per request.
func TestPoolMatchesPlan(t *testing.T) {
	const pageBytes = 8192
	perPage := map[cache.DType][2]int{cache.F32: {3, 16}, cache.BF16: {7, 32}, cache.FP8: {12, 62}}
	dir := releasedCacheShape(t)
	for dt, per := range perPage {
		m, err := hy4.Load(dir, cpu.New(0), model.Options{CacheDType: dt})
		if err != nil {
			t.Fatal(err)
		}
		pm, err := plan.PresetFor(plan.HY4, dt)
		if err != nil {
			t.Fatal(err)
		}
		if !enginetest.SameSpecs(m.CacheSpecs(), pm.Specs) {
			t.Fatalf("%v: the engine's kinds %+v, the plan's %+v", dt, m.CacheSpecs(), pm.Specs)
		}
		for _, n := range []int{1, 12, 40, 100} {
			e, err := engine.New(m, engine.Config{MaxBatchTokens: 256, PageBytes: pageBytes, Pages: 4000, EOS: -1, NoPrefixCache: true})
			if err != nil {
				t.Fatal(err)
			}
			held := -1
			if _, err := e.Submit(context.Background(), engine.Request{Prompt: enginetest.Repeating(n, 3, m.VocabSize(), 9), MaxTokens: 2, OnLogits: func(pos int, _ []float32) {
				if pos == n-1 {
					held = e.Pool().NumPages() - e.Pool().FreePages()
				}
			}}); err != nil {
				t.Fatal(err)
			}
			enginetest.Drain(t, e)
			want := 34*((n+per[0]-1)/per[0]) + 10*((n+per[1]-1)/per[1])
			if got := pm.Pages(n, pageBytes); got != want {
				t.Errorf("%v at %d tokens: plan predicts %d pages, by hand %d", dt, n, got, want)
			}
			if held != want {
				t.Errorf("%v at %d tokens: engine holds %d pages, by hand %d", dt, n, held, want)
			}
		}
		m.Close()
	}
}
