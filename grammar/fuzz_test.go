package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// jsonPrefixOK reports whether s is the beginning of some JSON text, as
// encoding/json's tokenizer sees it (an independent reader): reading it
// meets no syntax error before the input ends.
func jsonPrefixOK(s string) bool {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	for {
		_, err := dec.Token()
		var syn *json.SyntaxError
		switch {
		case err == nil:
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return true
		case errors.As(err, &syn):
			// A syntax error at the very end can be an incomplete literal
			// or escape ("tr", "\u00").
			return syn.Offset >= int64(len(s))
		default:
			return false
		}
	}
}

// FuzzCompileSchema: the schema compiler returns an error or a grammar for
// any input, never panics; what it compiles generates documents that the
// independent validator accepts.
func FuzzCompileSchema(f *testing.F) {
	for _, s := range matcherSchemas {
		f.Add([]byte(s), uint64(1))
	}
	for _, s := range []string{`true`, `{}`, `{"type":["integer","string"],"minimum":3,"maxLength":2}`,
		`{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},"$ref":"#/$defs/a"}`,
		`{"type":"array","prefixItems":[{"const":1}],"minItems":2,"items":{"enum":[true]}}`,
		`{"type":"number","minimum":0.125,"maximum":0.1251}`,
		`{"type":"object","required":["x"],"additionalProperties":{"type":"integer"}}`} {
		f.Add([]byte(s), uint64(2))
	}
	v := testVocab(f)
	f.Fuzz(func(t *testing.T, schema []byte, seed uint64) {
		if len(schema) > 1500 {
			return
		}
		g, err := CompileSchema(schema, Options{Whitespace: int(seed % 3)})
		if err != nil {
			return
		}
		doc, err := jsonschemaDoc(schema)
		if err != nil {
			return // the validator cannot read it: nothing to compare with
		}
		rng := newRand(seed)
		m := NewIndex(g, v).NewMatcher()
		text, complete := generate(t, m, rng, 200, 0.3)
		if !jsonPrefixOK(text) {
			t.Fatalf("schema %s: generated %q is not the start of JSON", schema, text)
		}
		if complete {
			if msg := validate(doc, text); msg != "" {
				t.Fatalf("schema %s: generated %q is invalid: %s", schema, text, msg)
			}
		}
	})
}

// FuzzMatcher: every token sequence the matcher allows (chosen by the fuzz
// input) is, at every step, the start of JSON that the plain recognizer
// also allows; a complete one validates against the schema.
func FuzzMatcher(f *testing.F) {
	f.Add(uint8(0), []byte{1, 2, 3, 200, 17})
	f.Add(uint8(2), []byte{255, 0, 9, 9, 9, 128})
	f.Add(uint8(3), bytes.Repeat([]byte{7}, 40))
	v := testVocab(f)
	type compiled struct{ ix *Index }
	var cache = map[uint8]compiled{}
	f.Fuzz(func(t *testing.T, which uint8, choices []byte) {
		which %= 4
		c, ok := cache[which]
		if !ok {
			g, err := CompileSchema([]byte(matcherSchemas[which]), Options{Whitespace: int(which % 2)})
			if err != nil {
				t.Fatal(err)
			}
			c = compiled{ix: NewIndex(g, v)}
			cache[which] = c
		}
		val := validator(t, matcherSchemas[which])
		m := c.ix.NewMatcher()
		mask := make([]uint64, m.Words())
		text := ""
		for i := 0; i+1 < len(choices) && i < 200; i += 2 {
			m.Allowed(mask)
			n := popcount(mask)
			if n == 0 {
				break
			}
			k := (int(choices[i])<<8 | int(choices[i+1])) % n
			tok := nthBit(mask, k)
			if err := m.Accept(tok); err != nil {
				t.Fatalf("after %q: allowed %d not accepted: %v", text, tok, err)
			}
			text += v.Token(tok)
			if _, prefix := c.ix.g.Recognize([]byte(text)); !prefix || !jsonPrefixOK(text) {
				t.Fatalf("schema %d: %q allowed, but it is not a prefix (recognizer %v)", which, text, prefix)
			}
		}
		if m.Complete() {
			if msg := validate(val, text); msg != "" {
				t.Fatalf("schema %d: %q is invalid: %s", which, text, msg)
			}
		}
	})
}

func nthBit(mask []uint64, k int) int32 {
	for w, bits := range mask {
		for bits != 0 {
			b := bits & -bits
			if k == 0 {
				return int32(w*64 + trailingZeros(b))
			}
			k--
			bits ^= b
		}
	}
	return -1
}
