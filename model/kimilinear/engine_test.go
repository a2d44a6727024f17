package kimilinear_test

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
	"github.com/strata-inference/strata/model/kimilinear"
	"github.com/strata-inference/strata/plan"
)

// Kimi Linear through the engine: its KDA layers' recurrent state (conv
// history and delta-rule state, overwritten every token) beside the MLA
// layers' appended latents, under prefix hits, speculative rollback and
// hand-off. The delta rule runs token by token on every path, so every
// comparison here is bit for bit.

var tinyDir = filepath.Join("..", "..", "testdata", "golden", "kimi-linear", "tiny")

func load(t testing.TB, dir string, dt cache.DType) *kimilinear.Model {
	t.Helper()
	m, err := kimilinear.Load(dir, cpu.New(0), model.Options{CacheDType: dt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// runOne runs one request to the end and returns its tokens and every
// logit row computed for it, by position.
func runOne(t testing.TB, e *engine.Engine, r engine.Request) ([]int32, map[int][]float32) {
	t.Helper()
	lg := map[int][]float32{}
	r.OnLogits = func(p int, l []float32) { lg[p] = slices.Clone(l) }
	s, err := e.Submit(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Drain(t, e)
	toks, _ := enginetest.Collect(t, s)
	return toks, lg
}

// TestPrefixHits: each turn of a conversation extends the last; with the
// prefix cache later turns restore the state (KDA state and conv history
// copied, MLA latents shared) from snapshots at multiples of 64 (the
// model's PrefixAlign) and produce the same tokens and logits, bit for bit,
// as recomputing everything.
func TestPrefixHits(t *testing.T) {
	m := load(t, tinyDir, cache.F32)
	align := m.PrefixAlign()
	if align != 64 {
		t.Fatalf("PrefixAlign %d, want 64", align)
	}
	mk := func(off bool) *engine.Engine {
		e, err := engine.New(m, engine.Config{MaxBatchTokens: 48, Pages: 400, PageBytes: 4096, EOS: -1, NoPrefixCache: off})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	cached, plain := mk(false), mk(true)
	V := m.VocabSize()
	conv := enginetest.Repeating(align+9, 17, V, 3)
	var hits []int64
	for turn := range 3 {
		r := engine.Request{Prompt: slices.Clone(conv), MaxTokens: align/2 + 5}
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
			if !slices.Equal(got, want) {
				t.Fatalf("turn %d position %d: logits differ by %g", turn, p, golden.MaxAbsDiff(got, want))
			}
		}
		conv = append(append(conv, a...), enginetest.Repeating(7+turn, 5, V, uint64(10+turn))...)
	}
	t.Logf("prefix tokens hit per turn: %v", hits)
	if hits[0] != 0 || hits[1] == 0 || hits[2] <= hits[1] {
		t.Fatalf("prefix tokens hit per turn %v: want none, then growing hits", hits)
	}
	for i, h := range hits {
		if h%int64(align) != 0 {
			t.Fatalf("turn %d hit %d tokens, not a multiple of %d", i, h, align)
		}
	}
}

// TestSpeculativeNgram: greedy decoding with n-gram speculation equals
// plain greedy decoding token for token, and every logit row the target
// computed for a kept position equals plain decoding's bit for bit, alone
// and batched. Drafts are rejected (the golden case's random weights
// rarely repeat a pattern): at every rejection the recurrent state is
// restored to before the verification feed and the kept tokens are fed
// again, and the rejected positions' latents are left stale past the
// sequence's length, rewritten before anything reads them.
func TestSpeculativeNgram(t *testing.T) {
	for _, tg := range []struct {
		name    string
		dir     string
		accepts bool
	}{{"tiny", tinyDir, false}, {"repeating", repeatingDir(t), true}} {
		t.Run(tg.name, func(t *testing.T) { speculate(t, load(t, tg.dir, cache.F32), tg.accepts) })
	}
}

// repeatingDir writes a random-weight model of the golden case's shape with
// tied embeddings and layers that change the residual stream little: it
// mostly repeats its input token, so that n-gram drafts are often
// accepted and sometimes rejected.
func repeatingDir(t testing.TB) string {
	b, err := os.ReadFile(filepath.Join(tinyDir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	json.Unmarshal(b, &c)
	c["tie_word_embeddings"] = true
	b, _ = json.Marshal(c)
	dir := t.TempDir()
	if err := kimilinear.WriteSynthetic(dir, b, kimilinear.SyntheticOptions{Seed: 3, LayerScale: 0.3}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func speculate(t *testing.T, m *kimilinear.Model, accepts bool) {
	V := m.VocabSize()
	prompts := [][]int32{enginetest.Repeating(60, 7, V, 1), append(enginetest.Repeating(20, 5, V, 2), enginetest.Repeating(20, 5, V, 2)...), enginetest.Repeating(33, 3, V, 6)}
	const n = 60
	cfg := engine.Config{MaxBatchTokens: 128, Pages: 600, PageBytes: 4096, EOS: -1, NoPrefixCache: true}
	want := enginetest.Generate(t, m, cfg, prompts, n, false)
	for _, batch := range []bool{false, true} {
		sc := cfg
		sc.Speculation = engine.Speculation{Method: engine.SpecNgram, MaxDraft: 4, Fixed: true}
		got := enginetest.Generate(t, m, sc, prompts, n, batch)
		for i := range prompts {
			if !slices.Equal(got.Tokens[i], want.Tokens[i]) {
				t.Fatalf("batch=%v prompt %d: speculative %v\nplain %v", batch, i, got.Tokens[i], want.Tokens[i])
			}
			for p, w := range want.Logits[i] {
				if d := golden.MaxAbsDiff(got.Logits[i][p], w); d != 0 {
					t.Fatalf("batch=%v prompt %d position %d: logits differ by %g", batch, i, p, d)
				}
			}
		}
		st := got.Stats
		t.Logf("batch=%v: %d verify steps, %d drafted, %d accepted", batch, st.SpecSteps, st.SpecDrafted, st.SpecAccepted)
		if st.SpecDrafted == 0 || st.SpecAccepted == st.SpecDrafted || accepts && st.SpecAccepted == 0 {
			t.Fatalf("want rejected drafts (and accepted ones: %v), got %d of %d accepted", accepts, st.SpecAccepted, st.SpecDrafted)
		}
	}
}

// TestHandoff: a request prefilled by one engine and continued by another
// (each with its own copy of the model, as two processes would have)
// gives exactly the tokens one engine gives, greedy and sampled: the
// recurrent state and the latents travel in the serialized state.
func TestHandoff(t *testing.T) {
	mA, mB := load(t, tinyDir, cache.F32), load(t, tinyDir, cache.F32)
	p := enginetest.Repeating(70, 13, mA.VocabSize(), 5)
	for _, sp := range []engine.Sampling{{}, {Temperature: 0.9, TopP: 0.9, Seed: 77}} {
		r := engine.Request{Prompt: p, MaxTokens: 30, Sampling: sp}
		cfg := engine.Config{Pages: 300, PageBytes: 4096, EOS: -1}
		one, _ := engine.New(mA, cfg)
		s, _ := one.Submit(context.Background(), r)
		enginetest.Drain(t, one)
		want, _ := enginetest.Collect(t, s)

		a, _ := engine.New(mA, cfg)
		b, _ := engine.New(mB, cfg)
		r.Handoff = true
		sa, _ := a.Submit(context.Background(), r)
		enginetest.Drain(t, a)
		first, last := enginetest.Collect(t, sa)
		if last.Finish != engine.FinishHandoff || last.Handoff == nil || len(first) != 1 {
			t.Fatalf("prefill side: %v tokens, finish %q", first, last.Finish)
		}
		var buf bytes.Buffer
		if _, err := last.Handoff.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		sb, err := b.Resume(context.Background(), &buf)
		if err != nil {
			t.Fatal(err)
		}
		enginetest.Drain(t, b)
		rest, _ := enginetest.Collect(t, sb)
		if got := append(first, rest...); !slices.Equal(got, want) {
			t.Fatalf("sampling %+v: handed off %v, one engine %v", sp, got, want)
		}
	}
}

// k3Pair is a checkpoint of one KDA and one MLA layer with Kimi-K3's cache
// shapes (KDA: 96 heads of 128, conv 4; MLA: latent 512 + key part 64) and
// tiny everything else, so that the engine's real pool use can be measured
// for Kimi-K3's per-layer kinds.
func k3Pair(t testing.TB) string {
	cfg := map[string]any{
		"model_type": "kimi_linear", "vocab_size": 64, "hidden_size": 16, "intermediate_size": 16, "num_hidden_layers": 2,
		"layer_types": []string{"linear_attention", "full_attention"}, "mlp_layer_types": []string{"dense", "dense"},
		"linear_num_heads": 96, "linear_head_dim": 128, "linear_conv_kernel_dim": 4,
		"num_attention_heads": 1, "kv_lora_rank": 512, "qk_nope_head_dim": 4, "qk_rope_head_dim": 64, "v_head_dim": 4,
		"num_experts": 2, "num_experts_per_token": 1, "moe_intermediate_size": 4, "model_max_length": 4096,
	}
	b, _ := json.Marshal(cfg)
	dir := t.TempDir()
	if err := kimilinear.WriteSynthetic(dir, b, kimilinear.SyntheticOptions{Seed: 4}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestPoolMatchesPlan: for the f32 and bf16 cache formats, the pages the
// engine holds for a request of n tokens equal what `strata plan` predicts
// from the checkpoint's config, and both equal the count worked out by
// hand, for the golden case and for Kimi-K3's per-layer shapes; and the
// Kimi-K3 preset's kinds are those per-layer kinds over 24 MLA and 69 KDA
// layers (conv history left out, as in the handbook): 27.0 KB per token,
// 414 MB fixed.
//
// Golden case, pages of 1024 B (the largest slot, one 16×16 f32 state):
//
//	mla:       2 layers, 40 values a token: f32 160 B (6 a page), bf16 80 B (12)
//	kda-state: 6 layers × 4 slots of 1024 B = 4 pages each
//	conv:      6 layers × 3 slots of 192 f32 channels (768 B, 1 a page) = 3 pages each
//
// Kimi-K3 pair, pages of 192 KiB (the engine's default: the largest slot,
// one conv column of 3·96·128 f32 channels, 147456 B, rounded up to whole
// 64 KiB):
//
//	mla:       1 layer, 576 values: f32 2304 B (85 a page), bf16 1152 B (170)
//	kda-state: 1 layer × 96 slots of 65536 B, 3 a page = 32 pages
//	conv:      1 layer × 3 slots of 147456 B, 1 a page = 3 pages
func TestPoolMatchesPlan(t *testing.T) {
	ceil := func(a, b int) int { return (a + b - 1) / b }
	type tc struct {
		name      string
		dir       string
		pageBytes int
		byHand    map[cache.DType]func(n int) int
		lengths   []int
	}
	cases := []tc{
		{"tiny", tinyDir, 1024, map[cache.DType]func(int) int{
			cache.F32:  func(n int) int { return 2*ceil(n, 6) + 6*4 + 6*3 },
			cache.BF16: func(n int) int { return 2*ceil(n, 12) + 6*4 + 6*3 },
		}, []int{1, 6, 7, 40, 100}},
		{"kimi-k3 pair", k3Pair(t), 192 << 10, map[cache.DType]func(int) int{
			cache.F32:  func(n int) int { return ceil(n, 85) + 32 + 3 },
			cache.BF16: func(n int) int { return ceil(n, 170) + 32 + 3 },
		}, []int{2, 86}},
	}
	for _, c := range cases {
		for _, dt := range []cache.DType{cache.F32, cache.BF16} {
			m := load(t, c.dir, dt)
			pm, err := plan.FromKimiLinearConfig(filepath.Join(c.dir, "config.json"), dt)
			if err != nil {
				t.Fatal(err)
			}
			if got := cache.PageBytesFor(m.CacheSpecs()); c.pageBytes == 192<<10 && got != c.pageBytes {
				t.Fatalf("%s %v: the engine's default page is %d bytes, want %d", c.name, dt, got, c.pageBytes)
			}
			for _, n := range c.lengths {
				e, err := engine.New(m, engine.Config{MaxBatchTokens: 256, Pages: 400, PageBytes: c.pageBytes, EOS: -1, NoPrefixCache: true})
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
				want := c.byHand[dt](n)
				if got := pm.Pages(n, c.pageBytes); got != want {
					t.Errorf("%s %v at %d tokens: plan predicts %d pages, by hand %d", c.name, dt, n, got, want)
				}
				if held != want {
					t.Errorf("%s %v at %d tokens: engine holds %d pages, by hand %d", c.name, dt, n, held, want)
				}
			}
		}
	}
	// The preset is the pair's bf16 kinds over Kimi-K3's layers.
	pair := load(t, cases[1].dir, cache.BF16).CacheSpecs()
	preset, err := plan.Preset(plan.KimiK3)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]cache.Spec{}
	for _, s := range pair {
		byName[s.Name] = s
	}
	if len(preset.Specs) != 2 {
		t.Fatalf("preset kinds %+v, want mla and kda-state", preset.Specs)
	}
	for _, s := range preset.Specs {
		e := byName[s.Name]
		n := map[string]int{kimilinear.KindMLA: 24, kimilinear.KindState: 69}[s.Name]
		if s.SlotBytes != e.SlotBytes || s.FixedSlots != e.FixedSlots || s.Kind() != e.Kind() || len(s.Layers) != n {
			t.Errorf("preset kind %s (%d layers, %d B, %d fixed) is not the engine's (%d B, %d fixed) over %d layers", s.Name, len(s.Layers), s.SlotBytes, s.FixedSlots, e.SlotBytes, e.FixedSlots, n)
		}
	}
	if got := preset.BytesPerToken(); got != 24*576*2 {
		t.Errorf("preset: %v bytes per token, want 24·576·2", got)
	}
	if got := preset.FixedBytes(); got != 69*96*128*128*4 {
		t.Errorf("preset: %d fixed bytes, want 69·96·128·128·4", got)
	}
	if l := preset.Ledger(); l.PerToken != "27.0 KB" || l.Fixed != "414 MB" {
		t.Errorf("preset ledger row %q, want 27.0 KB per token and 414 MB fixed", l.String())
	}
}
