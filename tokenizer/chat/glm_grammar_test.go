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

// TestGLMToolCallGrammar: random walks through the forced tool-call grammar
// (after the reasoning grammar in thinking mode) over the shipped
// tokenizer's vocabulary give replies that ParseGLM reads as calls of the
// tools and nothing else, whose arguments validate against each tool's
// parameter schema (checked by an independent validator).
func TestGLMToolCallGrammar(t *testing.T) {
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
	thinkEnd := int32(-1) // the token "</think>", taken now and then
	for id, s := range texts {
		if s == tokThinkEnd {
			thinkEnd = int32(id)
		}
	}
	if thinkEnd < 0 {
		t.Fatal("the vocabulary has no </think> token")
	}
	tools := []Tool{
		{Type: "function", Function: ToolFunction{Name: "get_weather", Parameters: json.RawMessage(
			`{"type":"object","properties":{"city":{"type":"string","maxLength":8},"days":{"type":"integer","minimum":1,"maximum":7},"units":{"enum":["c","f"]}},"required":["city"]}`)}},
		{Type: "function", Function: ToolFunction{Name: "noop"}},
		{Type: "function", Function: ToolFunction{Name: "tag", Parameters: json.RawMessage(
			`{"type":"object","properties":{"labels":{"type":"array","items":{"type":"string","maxLength":4},"maxItems":2},"x":{"anyOf":[{"type":"number","minimum":0,"maximum":1},{"type":"string","maxLength":3}]},"on":{"type":["boolean","null"]}},"required":["labels","x"]}`)}},
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
	called := map[string]int{}
	for _, tc := range []struct {
		maxCalls int
		thinking bool
	}{{1, false}, {0, false}, {1, true}} {
		x, err := GLMToolCalls(tools, tc.maxCalls, grammar.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if tc.thinking {
			x = grammar.Seq(GLMReasoning(), x)
		}
		g, err := grammar.Compile(x)
		if err != nil {
			t.Fatal(err)
		}
		ix := grammar.NewIndex(g, vocab)
		rng := rand.New(rand.NewPCG(uint64(tc.maxCalls), 11))
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
				id := allowed[rng.IntN(len(allowed))]
				if mask[thinkEnd>>6]>>(thinkEnd&63)&1 == 1 && rng.IntN(50) == 0 {
					id = thinkEnd // end the random reasoning in reasonable time
				}
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
			p, err := ParseGLM(reply, tc.thinking, tools)
			if err != nil {
				t.Fatalf("reply %q: %v", reply, err)
			}
			if p.Content != "" || len(p.ToolCalls) == 0 || (tc.maxCalls == 1 && len(p.ToolCalls) != 1) {
				t.Fatalf("reply %q parsed as content %q and %d calls", reply, p.Content, len(p.ToolCalls))
			}
			for _, c := range p.ToolCalls {
				called[c.Name]++
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
			t.Errorf("%+v: only %d of 40 walks completed", tc, done)
		}
	}
	for _, tl := range tools {
		if called[tl.Function.Name] == 0 {
			t.Errorf("no walk called %s (calls: %v)", tl.Function.Name, called)
		}
	}
}

// TestGLMReasoningGrammar: the reasoning grammar takes text up to the first
// </think> and refuses the markers at which ParseGLM would cut it short.
func TestGLMReasoningGrammar(t *testing.T) {
	g, err := grammar.Compile(GLMReasoning())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		text string
		ok   bool
	}{
		{"let me think</think>", true},
		{"</think>", true},
		{"a <tool_call>b</think>", false},
		{"done <|user|></think>", false},
		{"a</think>b</think>", false},
		{"no end", false},
	} {
		if got, _ := g.Recognize([]byte(tc.text)); got != tc.ok {
			t.Errorf("%q: matches %v, want %v", tc.text, got, tc.ok)
		}
	}
}
