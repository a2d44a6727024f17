package tokenizer

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// benchCorpus returns a few hundred KB of mixed text: the reference test
// texts (many languages, emoji, special tokens) and Go source code with
// English comments from GOROOT.
func benchCorpus(tb testing.TB) string {
	tb.Helper()
	var b strings.Builder
	exp := loadExpected(tb)
	for _, t := range exp.Texts {
		b.WriteString(t)
		b.WriteByte('\n')
	}
	for _, f := range []string{"src/strings/strings.go", "src/fmt/print.go", "src/net/http/server.go", "src/go/ast/ast.go"} {
		data, err := os.ReadFile(filepath.Join(runtime.GOROOT(), f))
		if err != nil {
			tb.Fatalf("benchmark corpus: %v", err)
		}
		b.Write(data)
	}
	return b.String()
}

// BenchmarkEncode measures Encode throughput (MB/s of input text) with a
// warm word cache ("warm") and with the cache emptied before every Encode
// ("cold"), on the tiny test tokenizer and, when STRATA_FIXTURES is set, the
// Qwen3 and DeepSeek-V3 tokenizers.
func BenchmarkEncode(b *testing.B) {
	corpus := benchCorpus(b)
	toks := []struct {
		name string
		load func(testing.TB) *Tokenizer
	}{
		{"tiny", func(tb testing.TB) *Tokenizer { return loadTiny(tb) }},
	}
	if os.Getenv(fixturesEnv) != "" {
		for _, rt := range realTokenizers {
			toks = append(toks, struct {
				name string
				load func(testing.TB) *Tokenizer
			}{rt.name, func(tb testing.TB) *Tokenizer { return realTokenizer(tb, rt.pkg) }})
		}
	}
	for _, tc := range toks {
		tok := tc.load(b)
		for _, cold := range []bool{false, true} {
			name := tc.name + "/warm"
			if cold {
				name = tc.name + "/cold"
			}
			b.Run(name, func(b *testing.B) {
				b.SetBytes(int64(len(corpus)))
				tok.Encode(corpus, true)
				b.ResetTimer()
				for b.Loop() {
					if cold {
						tok.cache.mu.Lock()
						tok.cache.m = nil
						tok.cache.mu.Unlock()
					}
					tok.Encode(corpus, true)
				}
			})
		}
	}
}

// BenchmarkLoad measures loading the real tokenizer.json files.
func BenchmarkLoad(b *testing.B) {
	for _, rt := range realTokenizers {
		path := fixture(b, rt.pkg, "package", "models", "tokenizer.json")
		b.Run(rt.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Load(path); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
