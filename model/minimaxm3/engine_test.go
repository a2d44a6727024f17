package minimaxm3_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/engine"
	"github.com/strata-inference/strata/engine/enginetest"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/model/minimaxm3"
	"github.com/strata-inference/strata/plan"
	"github.com/strata-inference/strata/safetensors"
)

var tinyDir = filepath.Join("..", "..", "testdata", "golden", "minimax-m3", "tiny")

func load(t testing.TB) *minimaxm3.Model {
	t.Helper()
	m, err := minimaxm3.Load(tinyDir, cpu.New(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestSpeculativeNgram: greedy decoding with n-gram speculation equals
// plain greedy decoding token for token, and every logit row the target
// computed for a kept position equals plain decoding's bit for bit,
// alone and batched, over contexts past the 4 blocks the selection keeps;
// drafts are both accepted and rejected (a rejected draft's K, V and
// indexer keys are left stale past the sequence's length and rewritten
// before anything reads them: exact rollback at no cost).
func TestSpeculativeNgram(t *testing.T) {
	m := load(t)
	V := m.VocabSize()
	prompts := [][]int32{enginetest.Repeating(70, 7, V, 1), enginetest.Repeating(45, 5, V, 2)}
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
// state (append kinds only: a hit at any position, here in the middle of
// an index block) and generates exactly what an engine without prefix
// caching generates; the hit copies at most the last, partly filled page
// of each layer's kinds.
func TestPrefixHit(t *testing.T) {
	m := load(t)
	V := m.VocabSize()
	first := enginetest.Repeating(40, 9, V, 3) // the hit at 51 tokens falls inside the 4th block of 16
	cfg := engine.Config{MaxBatchTokens: 48, Pages: 4000, PageBytes: 1024, EOS: -1}
	e, err := engine.New(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := e.Submit(context.Background(), engine.Request{Prompt: first, MaxTokens: 12})
	enginetest.Drain(t, e)
	out, _ := enginetest.Collect(t, s)
	second := append(append(slices.Clone(first), out...), enginetest.Repeating(40, 4, V, 4)...)
	copied := e.Pool().CopiedBytes()
	lg := map[int][]float32{}
	s2, _ := e.Submit(context.Background(), engine.Request{Prompt: second, MaxTokens: 30, OnLogits: func(p int, l []float32) { lg[p] = slices.Clone(l) }})
	enginetest.Drain(t, e)
	got, last := enginetest.Collect(t, s2)
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
	want := enginetest.Generate(t, m, engine.Config{MaxBatchTokens: 48, Pages: 4000, PageBytes: 1024, EOS: -1, NoPrefixCache: true}, [][]int32{second}, 30, false)
	if !slices.Equal(got, want.Tokens[0]) {
		t.Fatalf("after a prefix hit of %d tokens: %v, without: %v", last.CachedTokens, got, want.Tokens[0])
	}
	for p, l := range lg {
		if d := golden.MaxAbsDiff(l, want.Logits[0][p]); d != 0 {
			t.Fatalf("position %d: logits differ by %g", p, d)
		}
	}
}

// TestHandoff: a request prefilled by one engine and continued by another
// (each with its own copy of the model, as two processes would have)
// gives exactly the tokens one engine gives, greedy and sampled.
func TestHandoff(t *testing.T) {
	mA, mB := load(t), load(t)
	p := enginetest.Repeating(50, 13, mA.VocabSize(), 5)
	for _, sp := range []engine.Sampling{{}, {Temperature: 0.9, TopP: 0.9, Seed: 77}} {
		r := engine.Request{Prompt: p, MaxTokens: 40, Sampling: sp}
		cfg := engine.Config{Pages: 4000, PageBytes: 1024, EOS: -1}
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
		sb, err := b.Resume(context.Background(), &buf)
		if err != nil {
			t.Fatal(err)
		}
		enginetest.Drain(t, b)
		rest, _ := enginetest.Collect(t, sb)
		if got := append(firstToks, rest...); !slices.Equal(got, want) {
			t.Fatalf("sampling %+v: handed off %v, one engine %v", sp, got, want)
		}
	}
}

// releasedCacheShape is a checkpoint with the released MiniMax-M3's cache
// shapes (transformers' defaults: 60 layers of 4 KV heads of 128, indexer
// keys of 128) and tiny everything else. The released checkpoint's
// choice of MSA layers is not given by the spec; this one makes every
// layer but each fourth MSA (45 of 60), as its count enters the ledger
// only through the indexer keys.
func releasedCacheShape(t testing.TB) (string, int) {
	t.Helper()
	var types, mlp []string
	sparse := 0
	for l := range 60 {
		if l%4 == 3 {
			types = append(types, "full_attention")
		} else {
			types, sparse = append(types, "minimax_m3_sparse"), sparse+1
		}
		mlp = append(mlp, "dense")
	}
	cfg := map[string]any{"model_type": "minimax_m3_vl_text", "vocab_size": 64, "hidden_size": 16, "num_hidden_layers": 60,
		"num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 128, "index_n_heads": 4, "index_head_dim": 128,
		"dense_intermediate_size": 8, "layer_types": types, "mlp_layer_types": mlp, "bos_token_id": nil, "eos_token_id": nil}
	b, _ := json.Marshal(cfg)
	dir := t.TempDir()
	if err := minimaxm3.WriteSynthetic(dir, b, safetensors.F32, 3); err != nil {
		t.Fatal(err)
	}
	return dir, sparse
}

// TestPoolMatchesPlan: for each cache format, the pages the engine holds
// for a request of n tokens of the released cache shapes equal what
// `strata plan --config` predicts, and both equal the count worked out by
// hand: in pages of 8 KiB,
//
//	kv slot:  f32 2·4·128·4 = 4096 B (2 per page), bf16 2048 B (4)
//	key slot: f32 128·4 = 512 B (16), bf16 256 B (32)
//	pages(n) = 60·⌈n/kv per page⌉ + 45·⌈n/keys per page⌉
//
// with nothing fixed per request: 60·2·4·128·2 + 45·128·2 = 134,400 B per
// token in bf16 (131.25 KiB).
func TestPoolMatchesPlan(t *testing.T) {
	const pageBytes = 8192
	perPage := map[cache.DType][2]int{cache.F32: {2, 16}, cache.BF16: {4, 32}}
	dir, sparse := releasedCacheShape(t)
	for dt, per := range perPage {
		m, err := minimaxm3.LoadWith(dir, cpu.New(0), model.Options{CacheDType: dt})
		if err != nil {
			t.Fatal(err)
		}
		pm, err := plan.FromMiniMaxM3Config(filepath.Join(dir, "config.json"), dt)
		if err != nil {
			t.Fatal(err)
		}
		if !enginetest.SameSpecs(m.CacheSpecs(), pm.Specs) {
			t.Fatalf("%v: the engine's kinds %+v, the plan's %+v", dt, m.CacheSpecs(), pm.Specs)
		}
		if dt == cache.BF16 && pm.BytesPerToken() != 134400 {
			t.Errorf("bf16: %g bytes per token, want 134400", pm.BytesPerToken())
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
			want := 60*((n+per[0]-1)/per[0]) + sparse*((n+per[1]-1)/per[1])
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
