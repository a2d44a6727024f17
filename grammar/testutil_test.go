package grammar

import (
	"bytes"
	"math/bits"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/strata-inference/strata/tokenizer"
)

// The shipped model's tokenizer (6144 ids) is the vocabulary the matcher
// tests run on.
var kjvVocab = sync.OnceValues(func() (*Vocabulary, error) {
	tok, err := tokenizer.LoadDir(filepath.Join("..", "models", "strata-kjv"))
	if err != nil {
		return nil, err
	}
	return VocabularyOf(tok), nil
})

func testVocab(t testing.TB) *Vocabulary {
	t.Helper()
	v, err := kjvVocab()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// VocabularyOf is what a server does: every id's bytes, special tokens left
// out.
func VocabularyOf(tok *tokenizer.Tokenizer) *Vocabulary {
	texts := make([]string, tok.VocabSize())
	for id := range texts {
		if tok.IsSpecial(int32(id)) {
			continue
		}
		texts[id], _ = tok.TokenBytes(int32(id))
	}
	return NewVocabulary(texts)
}

// validator compiles schema with an independent JSON Schema implementation.
func validator(t testing.TB, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	return s
}

// validate checks doc against s; "" means valid.
func validate(s *jsonschema.Schema, doc string) string {
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		return "not JSON: " + err.Error()
	}
	if err := s.Validate(inst); err != nil {
		return err.Error()
	}
	return ""
}

// generate walks the matcher with random allowed tokens until the text is
// complete (then stopping with probability pStop per step) or maxTokens,
// and returns the text and whether it is complete.
func generate(t testing.TB, m *Matcher, rng *rand.Rand, maxTokens int, pStop float64) (string, bool) {
	t.Helper()
	v := m.x.v
	mask := make([]uint64, m.Words())
	var text strings.Builder
	var allowed []int32
	for range maxTokens {
		if m.Complete() && rng.Float64() < pStop {
			return text.String(), true
		}
		m.Allowed(mask)
		allowed = allowed[:0]
		for id := range v.Size() {
			if mask[id>>6]>>(id&63)&1 == 1 {
				allowed = append(allowed, int32(id))
			}
		}
		if len(allowed) == 0 {
			if !m.Complete() {
				t.Fatalf("no token allowed after %q, and the text is not complete", text.String())
			}
			return text.String(), true
		}
		tok := allowed[rng.IntN(len(allowed))]
		if err := m.Accept(tok); err != nil {
			t.Fatalf("after %q: allowed token %d (%q) not accepted: %v", text.String(), tok, v.Token(tok), err)
		}
		text.WriteString(v.Token(tok))
	}
	return text.String(), m.Complete()
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x5bd1e995)) }

func trailingZeros(x uint64) int { return bits.TrailingZeros64(x) }

// jsonschemaDoc compiles schema with the independent validator, or fails.
func jsonschemaDoc(schema []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		return nil, err
	}
	return c.Compile("schema.json")
}
