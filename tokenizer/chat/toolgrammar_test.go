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

// shippedVocab is the shipped tokenizer's vocabulary as the server binds
// grammars to it (special tokens left out).
func shippedVocab(t *testing.T) *grammar.Vocabulary {
	t.Helper()
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
	return grammar.NewVocabulary(texts)
}

// randomWalk follows a grammar token by token, each token drawn uniformly
// from those the matcher allows, for at most steps tokens; it reports the
// text and whether it is a whole output of the grammar.
func randomWalk(t *testing.T, ix *grammar.Index, rng *rand.Rand, steps int) (string, bool) {
	t.Helper()
	v := ix.Vocabulary()
	m := ix.NewMatcher()
	mask := make([]uint64, m.Words())
	var out strings.Builder
	for step := 0; step < steps && !m.Complete(); step++ {
		m.Allowed(mask)
		var allowed []int32
		for id := range v.Size() {
			if mask[id>>6]>>(id&63)&1 == 1 {
				allowed = append(allowed, int32(id))
			}
		}
		if len(allowed) == 0 {
			t.Fatalf("nothing allowed after %q", out.String())
		}
		id := allowed[rng.IntN(len(allowed))]
		if err := m.Accept(id); err != nil {
			t.Fatal(err)
		}
		out.WriteString(v.Token(id))
	}
	return out.String(), m.Complete()
}

func validators(t *testing.T, tools []Tool) map[string]*jsonschema.Schema {
	t.Helper()
	out := map[string]*jsonschema.Schema{}
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
		if out[tl.Function.Name], err = c.Compile("s.json"); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func validateCall(t *testing.T, vals map[string]*jsonschema.Schema, reply string, c ToolCall) {
	t.Helper()
	v := vals[c.Name]
	if v == nil {
		t.Fatalf("reply %q calls unknown tool %q", reply, c.Name)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(c.Arguments))
	if err != nil {
		t.Fatalf("reply %q: arguments %q: %v", reply, c.Arguments, err)
	}
	if err := v.Validate(inst); err != nil {
		t.Errorf("reply %q: arguments %s of %s are invalid: %v", reply, c.Arguments, c.Name, err)
	}
}

// qwenGrammarTools exercise every way ParseQwen35 types a value: raw text
// (string, no type, an enum of strings), integers, numbers with exclusive
// bounds, booleans, null, arrays and objects as JSON.
var qwenGrammarTools = []Tool{
	{Type: "function", Function: ToolFunction{Name: "get_weather", Parameters: json.RawMessage(
		`{"type":"object","properties":{"city":{"type":"string","maxLength":8},"days":{"type":"integer","minimum":1,"maximum":7},"units":{"enum":["c","f"]}},"required":["city"]}`)}},
	{Type: "function", Function: ToolFunction{Name: "noop"}},
	{Type: "function", Function: ToolFunction{Name: "tag", Parameters: json.RawMessage(
		`{"type":"object","properties":{"labels":{"type":"array","items":{"type":"string","maxLength":4},"maxItems":2},"x":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1},"on":{"type":"boolean"},"n":{"type":["integer","null"],"maximum":-5},"opt":{"type":"object","properties":{"k":{"type":"integer"}},"required":["k"],"additionalProperties":false}},"required":["labels","x","on"]}`)}},
}

// TestQwen35ToolCallGrammar: random walks through Qwen3.5's forced
// tool-call grammar over the shipped vocabulary give replies that
// ParseQwen35 reads as calls of the tools, with no content, whose
// arguments (typed by the parser from the schema) validate against each
// tool's parameter schema under an independent validator.
func TestQwen35ToolCallGrammar(t *testing.T) {
	vocab := shippedVocab(t)
	vals := validators(t, qwenGrammarTools)
	for _, maxCalls := range []int{1, 0} {
		x, err := Qwen35ToolCalls(ToolCallGrammar{Tools: qwenGrammarTools, MaxCalls: maxCalls})
		if err != nil {
			t.Fatal(err)
		}
		g, err := grammar.Compile(x)
		if err != nil {
			t.Fatal(err)
		}
		ix := grammar.NewIndex(g, vocab)
		rng := rand.New(rand.NewPCG(uint64(maxCalls), 11))
		done := 0
		for range 40 {
			reply, ok := randomWalk(t, ix, rng, 600)
			if !ok {
				continue
			}
			done++
			p, err := ParseQwen35(reply, false, qwenGrammarTools)
			if err != nil {
				t.Fatalf("reply %q: %v", reply, err)
			}
			if p.Content != "" || len(p.ToolCalls) == 0 || (maxCalls == 1 && len(p.ToolCalls) != 1) {
				t.Fatalf("reply %q parsed as content %q and %d calls", reply, p.Content, len(p.ToolCalls))
			}
			for _, c := range p.ToolCalls {
				validateCall(t, vals, reply, c)
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

// TestQwen35ToolCallGrammarTemplate: a call the grammar allows is exactly
// what the chat template writes for the same call after empty content.
func TestQwen35ToolCallGrammarTemplate(t *testing.T) {
	x, err := Qwen35ToolCalls(ToolCallGrammar{Tools: qwenGrammarTools})
	if err != nil {
		t.Fatal(err)
	}
	g, err := grammar.Compile(x)
	if err != nil {
		t.Fatal(err)
	}
	for _, reply := range []string{
		"<tool_call>\n<function=get_weather>\n<parameter=city>\nUr\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
		"<tool_call>\n<function=noop>\n</function>\n</tool_call>\n<tool_call>\n<function=tag>\n<parameter=labels>\n[\"a\"]\n</parameter>\n<parameter=x>\n0.25\n</parameter>\n<parameter=on>\ntrue\n</parameter>\n<parameter=n>\nnull\n</parameter>\n</function>\n</tool_call>",
	} {
		if ok, _ := g.Recognize([]byte(reply)); !ok {
			t.Errorf("grammar refuses %q", reply)
		}
		p, err := ParseQwen35(reply, false, qwenGrammarTools)
		if err != nil || len(p.ToolCalls) == 0 {
			t.Fatalf("%q: %+v, %v", reply, p, err)
		}
	}
	for _, reply := range []string{
		"<tool_call>\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",                                                                // city is required
		"<tool_call>\n<function=get_weather>\n<parameter=city>\nUr\n</parameter>\n<parameter=days>\n9\n</parameter>\n</function>\n</tool_call>",                            // days above 7
		"<tool_call>\n<function=tag>\n<parameter=labels>\n[]\n</parameter>\n<parameter=x>\n1\n</parameter>\n<parameter=on>\ntrue\n</parameter>\n</function>\n</tool_call>", // x not below 1
		"<tool_call>\n<function=get_weather>\n<parameter=city>\nUr\n</parameter>\n<parameter=units>\nk\n</parameter>\n</function>\n</tool_call>",                           // units not in the enum
		"<tool_call>\n<function=other>\n</function>\n</tool_call>",
	} {
		if ok, _ := g.Recognize([]byte(reply)); ok {
			t.Errorf("grammar accepts %q", reply)
		}
	}
}

// TestQwen35ToolCallGrammarErrors: a required parameter whose values the
// parser's typing cannot produce, or whose name cannot stand in a tag, is
// an error naming the tool and the parameter; an optional one is left out.
func TestQwen35ToolCallGrammarErrors(t *testing.T) {
	for _, tc := range []struct {
		schema string
		want   string // "" when it builds
	}{
		{`{"type":"object","properties":{"a":{"enum":[1,2]}},"required":["a"]}`, `"a"`},
		{`{"type":"object","properties":{"a":{"enum":[1,2]}}}`, ""},
		{`{"type":"object","properties":{"a>b":{"type":"string"}},"required":["a>b"]}`, `"a>b"`},
		{`{"type":"object","properties":{"a":{"type":"string","uniqueItems":true}},"required":["a"]}`, "uniqueItems"},
	} {
		_, err := Qwen35ToolCalls(ToolCallGrammar{Tools: []Tool{{Type: "function", Function: ToolFunction{Name: "f", Parameters: json.RawMessage(tc.schema)}}}})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.schema, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "tool f")):
			t.Errorf("%s: error %v, want one naming tool f and %s", tc.schema, err, tc.want)
		}
	}
}

// TestFreeToolCallGrammars: a tool that is not strict takes any
// arguments, in every format (DeepSeek-V4, V3.2, Qwen3.5, GLM), and its
// calls parse; a strict tool beside it still follows its schema.
func TestFreeToolCallGrammars(t *testing.T) {
	tools := []Tool{
		{Type: "function", Function: ToolFunction{Name: "free", Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)}},
		{Type: "function", Function: ToolFunction{Name: "strict", Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","maximum":3}},"required":["n"]}`)}},
	}
	g := ToolCallGrammar{Tools: tools, Free: []bool{true, false}}
	dsml, err := DeepSeekV4ToolCallBlock(g)
	if err != nil {
		t.Fatal(err)
	}
	qwen, err := Qwen35ToolCalls(g)
	if err != nil {
		t.Fatal(err)
	}
	dsml32, err := DeepSeekV32ToolCallBlock(g)
	if err != nil {
		t.Fatal(err)
	}
	glm, err := GLMToolCallBlock(g)
	if err != nil {
		t.Fatal(err)
	}
	dp := func(name, k, typ, v string) string {
		return "<｜DSML｜parameter name=\"" + k + "\" string=\"" + typ + "\">" + v + "</｜DSML｜parameter>"
	}
	dinv := func(name string, params ...string) string {
		return "<｜DSML｜invoke name=\"" + name + "\">\n" + strings.Join(params, "\n") + "\n</｜DSML｜invoke>"
	}
	dblock := func(invokes ...string) string {
		return "\n\n<｜DSML｜tool_calls>\n" + strings.Join(invokes, "\n") + "\n</｜DSML｜tool_calls>"
	}
	qcall := func(name string, params ...string) string {
		return "<tool_call>\n<function=" + name + ">\n" + strings.Join(params, "") + "</function>\n</tool_call>"
	}
	qp := func(k, v string) string { return "<parameter=" + k + ">\n" + v + "\n</parameter>\n" }
	dblock32 := func(invokes ...string) string {
		return "\n\n<｜DSML｜function_calls>\n" + strings.Join(invokes, "\n") + "\n</｜DSML｜function_calls>"
	}
	gcall := func(name string, args ...string) string {
		return "<tool_call>" + name + strings.Join(args, "") + "</tool_call>"
	}
	ga := func(k, v string) string { return "<arg_key>" + k + "</arg_key><arg_value>" + v + "</arg_value>" }
	for _, tc := range []struct {
		g          grammar.Expr
		reply      string
		ok         bool
		parse      func(string) (Parsed, error)
		args0      string
		callsCount int
	}{
		{dsml, dblock(dinv("free", dp("free", "anything", "true", "text <b>"), dp("free", "x.y-z", "false", `{"a":[1,null]}`))), true,
			func(s string) (Parsed, error) { return ParseDeepSeekV4(s, false) }, `{"anything": "text <b>", "x.y-z": {"a":[1,null]}}`, 1},
		{dsml, dblock(dinv("free"), dinv("strict", dp("strict", "n", "false", "3"))), true,
			func(s string) (Parsed, error) { return ParseDeepSeekV4(s, false) }, `{}`, 2},
		{dsml, dblock(dinv("strict", dp("strict", "n", "false", "4"))), false, nil, "", 0},
		{dsml, dblock(dinv("strict", dp("strict", "m", "false", "1"))), false, nil, "", 0},
		{qwen, qcall("free", qp("anything", "text\nover lines"), qp("n", "12")), true,
			func(s string) (Parsed, error) { return ParseQwen35(s, false, tools) }, `{"anything": "text\nover lines", "n": 12}`, 1},
		{qwen, qcall("free") + "\n" + qcall("strict", qp("n", "-2")), true,
			func(s string) (Parsed, error) { return ParseQwen35(s, false, tools) }, `{}`, 2},
		{qwen, qcall("strict", qp("n", "4")), false, nil, "", 0},
		{qwen, qcall("free", qp("1bad", "x")), false, nil, "", 0},
		{dsml32, dblock32(dinv("free", dp("free", "anything", "true", "text <b>"), dp("free", "x.y-z", "false", `{"a":[1,null]}`))), true,
			func(s string) (Parsed, error) { return ParseDeepSeekV32(s, false) }, `{"anything": "text <b>", "x.y-z": {"a":[1,null]}}`, 1},
		{dsml32, dblock32(dinv("free"), dinv("strict", dp("strict", "n", "false", "3"))), true,
			func(s string) (Parsed, error) { return ParseDeepSeekV32(s, false) }, `{}`, 2},
		{dsml32, dblock32(dinv("strict", dp("strict", "n", "false", "4"))), false, nil, "", 0},
		{dsml32, dblock(dinv("free")), false, nil, "", 0}, // V4's block name
		{glm, gcall("free", ga("anything", "text\nover lines"), ga("n", "12")), true,
			func(s string) (Parsed, error) { return ParseGLM(s, false, tools) }, `{"anything": "text\nover lines", "n": 12}`, 1},
		{glm, gcall("free") + gcall("strict", ga("n", "-2")), true,
			func(s string) (Parsed, error) { return ParseGLM(s, false, tools) }, `{}`, 2},
		{glm, gcall("strict", ga("n", "4")), false, nil, "", 0},
		{glm, gcall("strict", ga("n", "1"), ga("n", "2")), false, nil, "", 0},
		{glm, gcall("free", ga("1bad", "x")), false, nil, "", 0},
		{glm, gcall("free", ga("a", "x<|observation|>")), false, nil, "", 0},
	} {
		gr, err := grammar.Compile(tc.g)
		if err != nil {
			t.Fatal(err)
		}
		if ok, _ := gr.Recognize([]byte(tc.reply)); ok != tc.ok {
			t.Errorf("%q: accepted %v, want %v", tc.reply, ok, tc.ok)
		}
		if !tc.ok {
			continue
		}
		p, err := tc.parse(tc.reply)
		if err != nil || len(p.ToolCalls) != tc.callsCount || p.ToolCalls[0].Arguments != tc.args0 {
			t.Errorf("%q parsed as %+v (%v), want %d calls, the first with %s", tc.reply, p.ToolCalls, err, tc.callsCount, tc.args0)
		}
	}
}

// TestReplyTextGrammars: the reasoning and content grammars take what the
// parsers read as reasoning and content, and nothing they would read as
// markup.
func TestReplyTextGrammars(t *testing.T) {
	for _, tc := range []struct {
		name  string
		x     grammar.Expr
		texts map[string]bool
	}{
		{"DeepSeek-V4 reasoning", DeepSeekV4Reasoning(), map[string]bool{
			"I think. </thin </think>": true, "</think>": true, "a </think> b</think>": false,
			"x\n\n<｜DSML｜tool_calls>\n</think>": false, "x<｜end▁of▁sentence｜></think>": false, "no end": false}},
		{"DeepSeek-V4 content", DeepSeekV4Content(), map[string]bool{
			"": true, "Plain <b>text</b>, é.": true, "a <｜DSML｜invoke": false, "a<｜end▁of▁sentence｜>": false}},
		{"DeepSeek-V3.2 reasoning", DeepSeekV32Reasoning(), map[string]bool{
			"I think. </thin </think>": true, "a </think> b</think>": false,
			"x\n\n<｜DSML｜function_calls>\n</think>": false, "x<｜end▁of▁sentence｜></think>": false}},
		{"GLM content", GLMContent(), map[string]bool{
			"": true, "Some <tool text </tool_call>.": true, "x <tool_call>": false, "x<|user|>": false, "x<|observation|>": false, "x<|endoftext|>": false}},
		{"Qwen3.5 reasoning", Qwen35Reasoning(), map[string]bool{
			"Let me see.\n</think>\n\n": true, "</think>": false, "a<|im_end|></think>\n\n": false, "a</think>\n\nb</think>\n\n": false}},
		{"Qwen3.5 content", Qwen35Content(), map[string]bool{
			"": true, "Some <tool text.": true, "x <tool_call>": false, "x<|endoftext|>": false, "x<|im_end|>": false}},
	} {
		g, err := grammar.Compile(tc.x)
		if err != nil {
			t.Fatal(err)
		}
		for text, want := range tc.texts {
			if ok, _ := g.Recognize([]byte(text)); ok != want {
				t.Errorf("%s: %q accepted %v, want %v", tc.name, text, ok, want)
			}
		}
	}
}
