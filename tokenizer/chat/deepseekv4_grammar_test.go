package chat

import (
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/strata-inference/strata/grammar"
	"github.com/strata-inference/strata/tokenizer"
)

// TestDeepSeekV4ToolCallGrammar: random walks through the forced tool-call
// grammar over the shipped tokenizer's vocabulary give replies that
// ParseDeepSeekV4 reads as calls of the tools, whose arguments validate
// against each tool's parameter schema (checked by an independent
// validator), and that the encoder writes back identically.
func TestDeepSeekV4ToolCallGrammar(t *testing.T) {
	tok, err := tokenizer.LoadDir(filepath.Join("..", "..", "models", "strata-kjv"))
	if err != nil {
		t.Fatal(err)
	}
	texts := make([]string, tok.VocabSize())
	for id := range texts {
		if !tok.IsSpecial(int32(id)) {
			texts[id], _ = tok.TokenBytes(int32(id))
		}
	}
	vocab := grammar.NewVocabulary(texts)
	tools := []Tool{
		{Type: "function", Function: ToolFunction{Name: "get_weather", Parameters: json.RawMessage(
			`{"type":"object","properties":{"city":{"type":"string","maxLength":8},"days":{"type":"integer","minimum":1,"maximum":7},"units":{"enum":["c","f"]}},"required":["city"]}`)}},
		{Type: "function", Function: ToolFunction{Name: "noop"}},
		{Type: "function", Function: ToolFunction{Name: "tag", Parameters: json.RawMessage(
			`{"type":"object","properties":{"labels":{"type":"array","items":{"type":"string","maxLength":4},"maxItems":2},"x":{"anyOf":[{"type":"number","minimum":0,"maximum":1},{"type":"string","maxLength":3}]}},"required":["labels","x"]}`)}},
	}
	validators := map[string]*jsonschema.Schema{}
	for _, tl := range tools {
		schema := string(tl.Function.Parameters)
		if schema == "" {
			schema = `{"type":"object","maxProperties":0}`
		}
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		c.AddResource("s.json", doc)
		if validators[tl.Function.Name], err = c.Compile("s.json"); err != nil {
			t.Fatal(err)
		}
	}
	for _, maxCalls := range []int{1, 0} {
		x, err := DeepSeekV4ToolCalls(tools, maxCalls, grammar.Options{})
		if err != nil {
			t.Fatal(err)
		}
		g, err := grammar.Compile(x)
		if err != nil {
			t.Fatal(err)
		}
		ix := grammar.NewIndex(g, vocab)
		rng := rand.New(rand.NewPCG(uint64(maxCalls), 9))
		done := 0
		for run := 0; run < 40; run++ {
			m := ix.NewMatcher()
			mask := make([]uint64, m.Words())
			var out strings.Builder
			for step := 0; step < 600 && !m.Complete(); step++ {
				m.Allowed(mask)
				var allowed []int32
				for id := range vocab.Size() {
					if mask[id>>6]>>(id&63)&1 == 1 {
						allowed = append(allowed, int32(id))
					}
				}
				if len(allowed) == 0 {
					t.Fatalf("nothing allowed after %q", out.String())
				}
				// Prefer short tokens now and then, so that raw text ends.
				id := allowed[rng.IntN(len(allowed))]
				if err := m.Accept(id); err != nil {
					t.Fatal(err)
				}
				out.WriteString(vocab.Token(id))
			}
			if !m.Complete() {
				continue
			}
			done++
			reply := out.String()
			p, err := ParseDeepSeekV4(reply, false)
			if err != nil {
				t.Fatalf("reply %q: %v", reply, err)
			}
			if p.Content != "" || len(p.ToolCalls) == 0 || (maxCalls == 1 && len(p.ToolCalls) != 1) {
				t.Fatalf("reply %q parsed as content %q and %d calls", reply, p.Content, len(p.ToolCalls))
			}
			for _, c := range p.ToolCalls {
				v := validators[c.Name]
				if v == nil {
					t.Fatalf("reply %q calls unknown tool %q", reply, c.Name)
				}
				inst, err := jsonschema.UnmarshalJSON(strings.NewReader(c.Arguments))
				if err != nil {
					t.Fatalf("arguments %q: %v", c.Arguments, err)
				}
				if err := v.Validate(inst); err != nil {
					t.Errorf("reply %q: arguments %s of %s are invalid: %v", reply, c.Arguments, c.Name, err)
				}
			}
			if done <= 2 {
				t.Logf("%q -> %+v", reply, p.ToolCalls)
			}
		}
		if done < 10 {
			t.Errorf("max calls %d: only %d of 40 walks completed", maxCalls, done)
		}
	}
}
