package engine

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/grammar"
	"github.com/strata-inference/strata/model/deepseekv4"
	"github.com/strata-inference/strata/tokenizer"
)

// BenchmarkConstrainedDecode decodes with the shipped model, plainly and
// under a JSON Schema constraint (the same run, the same prompt and
// length), and reports the time per generated token of each: the
// difference is what constrained decoding costs a step (masking the
// logits included), set against a real decode step.
func BenchmarkConstrainedDecode(b *testing.B) {
	dir := filepath.Join("..", "models", "strata-kjv")
	m, err := deepseekv4.Load(dir, cpu.New(0))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	tok, err := tokenizer.LoadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	texts := make([]string, m.VocabSize())
	for id := range min(len(texts), tok.VocabSize()) {
		if !tok.IsSpecial(int32(id)) {
			texts[id], _ = tok.TokenBytes(int32(id))
		}
	}
	vocab := grammar.NewVocabulary(texts)
	g, err := grammar.CompileSchema([]byte(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`), grammar.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ix := grammar.NewIndex(g, vocab)
	e, err := New(m, Config{MaxBatchTokens: 256, Pages: 4000, EOS: int32(m.Cfg.EOS), NoPrefixCache: true})
	if err != nil {
		b.Fatal(err)
	}
	prompt := tok.Encode("And God said, Let there be light", true)
	const n = 48
	run := func(b *testing.B, constrained bool) {
		toks := 0
		for b.Loop() {
			r := Request{Prompt: prompt, MaxTokens: n, IgnoreEOS: true}
			if constrained {
				r.Constraint = ix.NewMatcher()
			}
			st, err := e.Submit(context.Background(), r)
			if err != nil {
				b.Fatal(err)
			}
			for !e.Idle() {
				if _, err := e.Step(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			out, _, err := st.Collect(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			toks += len(out)
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(toks), "ms/token")
	}
	b.Run("plain", func(b *testing.B) { run(b, false) })
	b.Run("json-schema", func(b *testing.B) { run(b, true) })
}

// BenchmarkApplyMask times masking one row of logits at DeepSeek-V4's
// vocabulary size (129280), with a mask allowing one token in 50 and one
// allowing all but one in 50, next to copying the row (which the sampler
// does for every request anyway) as the baseline.
func BenchmarkApplyMask(b *testing.B) {
	const V = 129280
	x := make([]float32, V)
	src := make([]float32, V)
	sparse := make([]uint64, (V+63)/64)
	dense := make([]uint64, (V+63)/64)
	for t := range V {
		if t%50 == 0 {
			sparse[t>>6] |= 1 << (t & 63)
		} else {
			dense[t>>6] |= 1 << (t & 63)
		}
	}
	b.Run("copy", func(b *testing.B) {
		for b.Loop() {
			copy(x, src)
		}
	})
	b.Run("sparse", func(b *testing.B) {
		for b.Loop() {
			applyMask(x, sparse)
		}
	})
	b.Run("dense", func(b *testing.B) {
		for b.Loop() {
			applyMask(x, dense)
		}
	})
}
