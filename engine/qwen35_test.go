package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model/qwen35"
)

// Qwen3.5 through the engine: its recurrent state (conv history and
// delta-rule state, overwritten every token) under prefix hits, speculative
// rollback and hand-off. The delta rule runs token by token on every path,
// so every comparison here is bit for bit.

var qwenCases = []string{"qwen3.5/tiny", "qwen3.5-moe/tiny"}

func loadQwen(t *testing.T, dir string) *qwen35.Model {
	t.Helper()
	m, err := qwen35.Load(dir, cpu.New(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// qwenMTPDir writes a random-weight model of the dense golden case's shape
// with an MTP module (the golden checkpoints have none), a tied head and
// layers that change the residual stream little: it mostly repeats its
// input token, which the MTP module (fc the identity on its embedding
// half) drafts, so drafts are often accepted and sometimes rejected.
func qwenMTPDir(t *testing.T) string {
	return qwenSyntheticDir(t, 1.5)
}

func qwenSyntheticDir(t *testing.T, scale float64) string {
	t.Helper()
	b, err := os.ReadFile(caseDir("qwen3.5/tiny") + "/config.json")
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	c["mtp_num_hidden_layers"] = 1
	c["tie_word_embeddings"] = true
	cfg, _ := json.Marshal(c)
	dir := t.TempDir()
	if err := qwen35.WriteSynthetic(dir, cfg, qwen35.SyntheticOptions{Seed: 3, LayerScale: scale}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestQwen35PrefixHits: each turn of a conversation extends the last; with
// the prefix cache later turns restore the recurrent state from snapshots
// at multiples of 64 (the model's PrefixAlign) and produce the same tokens
// and logits, bit for bit, as recomputing everything.
func TestQwen35PrefixHits(t *testing.T) {
	for _, name := range qwenCases {
		t.Run(name, func(t *testing.T) {
			m := loadQwen(t, caseDir(name))
			align := m.PrefixAlign()
			mk := func(off bool) *Engine {
				e, err := New(m, Config{MaxBatchTokens: 48, Pages: 400, PageBytes: 4096, EOS: -1, NoPrefixCache: off})
				if err != nil {
					t.Fatal(err)
				}
				return e
			}
			cached, plain := mk(false), mk(true)
			V := m.VocabSize()
			conv := prompt(align+9, 3, V)
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
				conv = append(append(conv, a...), prompt(7+turn, 10+turn, V)...)
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
		})
	}
}

// TestQwen35Speculative: greedy output with speculative decoding equals
// plain decoding token for token, and every logit the target computed for
// a kept position equals plain decoding's bit for bit, alone and in a
// batch: n-gram drafts on both golden cases (whose random weights make
// drafts rarely right: rejections), MTP and n-gram drafts on a
// random-weight model with an MTP module that often repeats itself
// (drafts both accepted and rejected). The recurrent state's rollback
// (restore to before the verification feed, then the kept tokens fed
// again) runs at every rejection.
func TestQwen35Speculative(t *testing.T) {
	type target struct {
		name, dir string
		methods   []string
		accepts   bool // drafts must be accepted too
	}
	targets := []target{{"qwen3.5/tiny", caseDir("qwen3.5/tiny"), []string{SpecNgram}, false}, {"qwen3.5-moe/tiny", caseDir("qwen3.5-moe/tiny"), []string{SpecNgram}, false},
		{"qwen3.5/tiny+mtp", qwenMTPDir(t), []string{SpecMTP, SpecNgram}, true}}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			m := loadQwen(t, tg.dir)
			V := m.VocabSize()
			// Repeats give the n-gram drafter something to find.
			prompts := [][]int32{prompt(20, 0, V), append(prompt(20, 1, V), prompt(20, 1, V)...), prompt(33, 5, V)}
			const n = 60
			run := func(method string, batch bool) ([][]int32, []map[int][]float32, Stats) {
				e, err := New(m, Config{MaxBatchTokens: 128, Pages: 600, PageBytes: 4096, EOS: -1, NoPrefixCache: true,
					Speculation: Speculation{Method: method, MaxDraft: 4, Fixed: true}})
				if err != nil {
					t.Fatal(err)
				}
				outs := make([][]int32, len(prompts))
				lgs := make([]map[int][]float32, len(prompts))
				var streams []*Stream
				for i, p := range prompts {
					lgs[i] = map[int][]float32{}
					s, err := e.Submit(context.Background(), Request{Prompt: p, MaxTokens: n, OnLogits: capture(lgs[i])})
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
			for _, method := range tg.methods {
				for _, batch := range []bool{false, true} {
					got, gotL, st := run(method, batch)
					for i := range prompts {
						if !slices.Equal(got[i], want[i]) {
							t.Fatalf("%s batch=%v prompt %d: %v\nplain: %v", method, batch, i, got[i], want[i])
						}
						for p, w := range wantL[i] {
							if !slices.Equal(gotL[i][p], w) {
								t.Fatalf("%s batch=%v prompt %d position %d: logits differ by %g", method, batch, i, p, golden.MaxAbsDiff(gotL[i][p], w))
							}
						}
					}
					t.Logf("%s batch=%v: %d verify steps, %d drafted, %d accepted, %d steps in all", method, batch, st.SpecSteps, st.SpecDrafted, st.SpecAccepted, st.Steps)
					if st.SpecAccepted == st.SpecDrafted || (tg.accepts && st.SpecAccepted == 0) {
						t.Fatalf("%s: want rejected drafts (and accepted ones: %v), got %d of %d accepted", method, tg.accepts, st.SpecAccepted, st.SpecDrafted)
					}
				}
			}
		})
	}
}

// TestQwen35Handoff: a request prefilled by one engine and continued by
// another (each with its own copy of the model) gives exactly the tokens
// one engine gives, greedy and sampled: the recurrent state travels in the
// serialized state.
func TestQwen35Handoff(t *testing.T) {
	for _, name := range qwenCases {
		t.Run(name, func(t *testing.T) {
			mA, mB := loadQwen(t, caseDir(name)), loadQwen(t, caseDir(name))
			p := prompt(70, 4, mA.VocabSize())
			for _, sp := range []Sampling{{}, {Temperature: 0.9, TopP: 0.9, Seed: 77}} {
				r := Request{Prompt: p, MaxTokens: 30, Sampling: sp}
				cfg := Config{Pages: 300, PageBytes: 4096, EOS: -1}
				one, _ := New(mA, cfg)
				s, _ := one.Submit(context.Background(), r)
				drain(t, one)
				want, _ := collect(t, s)

				a, _ := New(mA, cfg)
				b, _ := New(mB, cfg)
				r.Handoff = true
				sa, _ := a.Submit(context.Background(), r)
				drain(t, a)
				first, last, err := sa.Collect(context.Background())
				if err != nil || last.Finish != FinishHandoff || len(first) != 1 {
					t.Fatalf("prefill side: %v tokens, finish %q, err %v", first, last.Finish, err)
				}
				sb, err := b.Resume(context.Background(), bytes.NewReader(written(t, last)))
				if err != nil {
					t.Fatal(err)
				}
				drain(t, b)
				rest, _ := collect(t, sb)
				if got := append(first, rest...); !slices.Equal(got, want) {
					t.Fatalf("sampling %+v: handed off %v, one engine %v", sp, got, want)
				}
			}
		})
	}
}
