package chat

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func loadQwen35(t testing.TB) *Template {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "qwen3.5", "chat_template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := NewTemplate(string(src))
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

var qwenWeatherTool = Tool{Type: "function", Function: ToolFunction{
	Name:        "get_weather",
	Description: "Get the weather.",
	Parameters:  json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}`),
}}

// qwenToolsPreamble is the template's system text for tools, after the
// tool list (copied from the template's literal).
const qwenToolsPreamble = "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n" +
	"<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n" +
	"<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n</parameter>\n" +
	"</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n" +
	"- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n" +
	"- Required parameters MUST be specified\n" +
	"- You may provide optional reasoning for your function call in natural language BEFORE the function call, but NOT after\n" +
	"- If there is no function call available, answer the question like normal with your current knowledge and do not tell the user about function calls\n" +
	"</IMPORTANT>"

// TestTemplateQwen35 renders with Qwen3.5's template. The expected prompts
// were derived by hand from the template (testdata/qwen3.5):
//
// Thinking: without enable_thinking the generation prompt opens a think
// block; with enable_thinking false it writes an empty one.
//
// Multi-turn: the reverse scan sets last_query_index to the last user
// message; assistant turns up to it render without their reasoning, and
// every content is trimmed.
//
// Tools: the system turn lists the tools as tojson, then the format
// instructions, then the system content after a blank line. The assistant
// turn after the last query shows its (trimmed) reasoning in a think block;
// its content is empty, so the first <tool_call> follows directly; each
// argument is "<parameter=K>\nV\n</parameter>\n" with V through the string
// filter. The tool result opens a user turn (the previous message is not a
// tool) and closes it (the next is not a tool); the last assistant turn,
// also after the query, gets an empty think block.
func TestTemplateQwen35(t *testing.T) {
	tmpl := loadQwen35(t)
	tests := []struct {
		name  string
		msgs  []Message
		tools []Tool
		gen   bool
		extra map[string]any
		want  string
	}{
		{"thinking", []Message{{Role: "system", Content: "You are helpful."}, {Role: "user", Content: "Hi there"}}, nil, true, nil,
			"<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n<think>\n"},
		{"multi-turn, thinking off", []Message{
			{Role: "user", Content: "2+2?"},
			{Role: "assistant", ReasoningContent: "Add.", Content: "4"},
			{Role: "user", Content: "  And 3+3?  "},
		}, nil, true, map[string]any{"enable_thinking": false},
			"<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n<|im_start|>user\nAnd 3+3?<|im_end|>\n" +
				"<|im_start|>assistant\n<think>\n\n</think>\n\n"},
		{"tools", []Message{
			{Role: "system", Content: "Be brief."},
			{Role: "user", Content: "Weather in Paris?"},
			{Role: "assistant", ReasoningContent: "\nNeed the tool.\n", ToolCalls: []ToolCall{{ID: "c1", Name: "get_weather", Arguments: `{"city": "Paris", "days": 3}`}}},
			{Role: "tool", ToolCallID: "c1", Content: "18C"},
			{Role: "assistant", Content: "It is 18C."},
		}, []Tool{qwenWeatherTool}, false, nil,
			"<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n" +
				`{"type": "function", "function": {"name": "get_weather", "description": "Get the weather.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}` +
				"\n</tools>" + qwenToolsPreamble + "\n\nBe brief.<|im_end|>\n" +
				"<|im_start|>user\nWeather in Paris?<|im_end|>\n" +
				"<|im_start|>assistant\n<think>\nNeed the tool.\n</think>\n\n" +
				"<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call><|im_end|>\n" +
				"<|im_start|>user\n<tool_response>\n18C\n</tool_response><|im_end|>\n" +
				"<|im_start|>assistant\n<think>\n\n</think>\n\nIt is 18C.<|im_end|>\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tmpl.Render(tc.msgs, tc.tools, tc.gen, tc.extra)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("differs at byte %d\n got: %q\nwant: %q", firstDiff(got, tc.want), got, tc.want)
			}
		})
	}
	if _, err := tmpl.Render([]Message{{Role: "system", Content: "x"}}, nil, true, nil); err == nil || !strings.Contains(err.Error(), "No user query") {
		t.Errorf("no user message: error %v", err)
	}
}

// TestTemplateQwen35RoundTrip: an assistant turn with reasoning, content
// and tool calls, rendered by the template after its prompt, parses back
// to the same turn.
func TestTemplateQwen35RoundTrip(t *testing.T) {
	tmpl := loadQwen35(t)
	user := Message{Role: "user", Content: "Plan a trip."}
	turn := Message{Role: "assistant", ReasoningContent: "Two cities.", Content: "Checking both.", ToolCalls: []ToolCall{
		{Name: "get_weather", Arguments: `{"city": "Paris", "days": 3}`},
		{Name: "get_weather", Arguments: `{"city": "Rome\nItaly", "days": 1}`},
	}}
	tools := []Tool{qwenWeatherTool}
	prompt, err := tmpl.Render([]Message{user}, tools, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	full, err := tmpl.Render([]Message{user, turn}, tools, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(full, prompt) {
		t.Fatalf("rendered turn does not continue the prompt:\n%q\n%q", full, prompt)
	}
	completion := full[len(prompt):]
	got, err := ParseQwen35(completion, true, tools)
	if err != nil {
		t.Fatal(err)
	}
	want := Parsed{Reasoning: turn.ReasoningContent, Content: turn.Content, ToolCalls: turn.ToolCalls}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\n got %#v\nwant %#v", got, want)
	}
	checkQwenStream(t, completion, true, tools, splitEvery(completion, 1))
}

func TestParseQwen35(t *testing.T) {
	tools := []Tool{qwenWeatherTool, {Type: "function", Function: ToolFunction{Name: "set", Parameters: json.RawMessage(
		`{"type": "object", "properties": {"on": {"type": "boolean"}, "level": {"type": ["number", "null"]}, "tags": {"type": "array"}, "opts": {"type": "object"}, "note": {"type": "string"}}}`)}}}
	tests := []struct {
		name       string
		completion string
		thinking   bool
		want       Parsed
		malformed  bool
	}{
		{"plain", "Hello!<|im_end|>junk", false, Parsed{Content: "Hello!"}, false},
		{"thinking", "Let me think.\n</think>\n\nThe answer is 4.<|im_end|>", true,
			Parsed{Reasoning: "Let me think.", Content: "The answer is 4."}, false},
		{"repeated think tag", "<think>\nHmm.\n</think>\n\nYes.", true, Parsed{Reasoning: "Hmm.", Content: "Yes."}, false},
		{"cut short in reasoning", "Still thinking <tool_call> about", true, Parsed{Reasoning: "Still thinking <tool_call> about"}, false},
		{"end of text", "Done.<|endoftext|><|im_end|>", false, Parsed{Content: "Done."}, false},
		{"xml tool call", "Sure.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call><|im_end|>", false,
			Parsed{Content: "Sure.", ToolCalls: []ToolCall{{Name: "get_weather", Arguments: `{"city": "Paris", "days": 3}`}}}, false},
		{"typed arguments", "<tool_call>\n<function=set>\n<parameter=on>\nTrue\n</parameter>\n<parameter=level>\n2.50\n</parameter>\n" +
			"<parameter=tags>\n[\"a\", 1]\n</parameter>\n<parameter=opts>\n{\"x\":{\"y\":null}}\n</parameter>\n<parameter=note>\nnull\n</parameter>\n" +
			"<parameter=extra>\n7\n</parameter>\n</function>\n</tool_call>", false,
			Parsed{ToolCalls: []ToolCall{{Name: "set", Arguments: `{"on": true, "level": 2.5, "tags": ["a", 1], "opts": {"x": {"y": null}}, "note": "null", "extra": "7"}`}}}, false},
		{"untyped values and unknown tool", "<tool_call>\n<function=other>\n<parameter=n>\n5\n</parameter>\n<parameter=multi>\nline 1\nline 2\n\n</parameter>\n</function>\n</tool_call>", false,
			Parsed{ToolCalls: []ToolCall{{Name: "other", Arguments: `{"n": "5", "multi": "line 1\nline 2\n"}`}}}, false},
		{"null and fallbacks", "<tool_call>\n<function=set>\n<parameter=level>\nNone\n</parameter>\n<parameter=on>\nmaybe\n</parameter>\n<parameter=tags>\n[oops\n</parameter>\n</function>\n</tool_call>", false,
			Parsed{ToolCalls: []ToolCall{{Name: "set", Arguments: `{"level": null, "on": "maybe", "tags": "[oops"}`}}}, false},
		{"two calls, json form", "Two.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n<tool_call>\n<function=get_weather>\n</function>\n</tool_call>\n", false,
			Parsed{Content: "Two.", ToolCalls: []ToolCall{{Name: "get_weather", Arguments: `{"city": "Oslo"}`}, {Name: "get_weather", Arguments: `{}`}}}, false},
		{"thinking then tool call", "Need data.</think><tool_call>\n<function=get_weather>\n<parameter=city>\nLima\n</parameter>\n</function>\n</tool_call>", true,
			Parsed{Reasoning: "Need data.", ToolCalls: []ToolCall{{Name: "get_weather", Arguments: `{"city": "Lima"}`}}}, false},
		{"text after the calls", "A\n<tool_call>\n<function=f>\n</function>\n</tool_call>\nmore", false,
			Parsed{Content: "A\n<tool_call>\n<function=f>\n</function>\n</tool_call>\nmore"}, true},
		{"unclosed call", "A <tool_call>\n<function=f>\n<parameter=x>\n1", false, Parsed{Content: "A <tool_call>\n<function=f>\n<parameter=x>\n1"}, true},
		{"duplicate parameter", "<tool_call>\n<function=f>\n<parameter=x>\n1\n</parameter>\n<parameter=x>\n2\n</parameter>\n</function>\n</tool_call>", false,
			Parsed{Content: "<tool_call>\n<function=f>\n<parameter=x>\n1\n</parameter>\n<parameter=x>\n2\n</parameter>\n</function>\n</tool_call>"}, true},
		{"bad json call", "<tool_call>\n{\"arguments\": {}}\n</tool_call>", false, Parsed{Content: "<tool_call>\n{\"arguments\": {}}\n</tool_call>"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseQwen35(tc.completion, tc.thinking, tools)
			if tc.malformed != (err != nil) || (err != nil && !errors.Is(err, ErrMalformedQwen35ToolCalls)) {
				t.Fatalf("error %v, want malformed=%v", err, tc.malformed)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("\n got %#v\nwant %#v", got, tc.want)
			}
			for _, a := range got.ToolCalls {
				if !json.Valid([]byte(a.Arguments)) {
					t.Errorf("arguments %q are not JSON", a.Arguments)
				}
			}
			checkQwenStream(t, tc.completion, tc.thinking, tools, splitEvery(tc.completion, 1))
			checkQwenStream(t, tc.completion, tc.thinking, tools, []string{tc.completion})
			r := rand.New(rand.NewPCG(uint64(len(tc.completion)), 1))
			for range 20 {
				checkQwenStream(t, tc.completion, tc.thinking, tools, randomSplit(r, tc.completion))
			}
		})
	}
}

func splitEvery(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

func randomSplit(r *rand.Rand, s string) []string {
	var out []string
	for len(s) > 0 {
		n := 1 + r.IntN(min(len(s), 12))
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// checkQwenStream feeds completion to a Qwen35StreamParser in pieces and
// checks that every delta extends a prefix of the batch parse (so markup
// never leaks and nothing is retracted), that the deltas add up to it, and
// that Finish returns it.
func checkQwenStream(t testing.TB, completion string, thinking bool, tools []Tool, pieces []string) {
	t.Helper()
	want, wantErr := ParseQwen35(completion, thinking, tools)
	p := NewQwen35StreamParser(thinking, tools)
	var reasoning, content strings.Builder
	for _, piece := range pieces {
		r, c := p.Add(piece)
		reasoning.WriteString(r)
		content.WriteString(c)
		if c != "" && reasoning.String() != want.Reasoning {
			t.Fatalf("%q in %q: content began before the reasoning was complete (%q)", completion, pieces, reasoning.String())
		}
		if !strings.HasPrefix(want.Reasoning, reasoning.String()) || !strings.HasPrefix(want.Content, content.String()) {
			t.Fatalf("%q in %q: after %q emitted (%q, %q), not prefixes of (%q, %q)", completion, pieces, piece, reasoning.String(), content.String(), want.Reasoning, want.Content)
		}
	}
	r, c, got, err := p.Finish()
	reasoning.WriteString(r)
	content.WriteString(c)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%q in %q: stream error %v, batch error %v", completion, pieces, err, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q in %q:\nstream %#v\n batch %#v", completion, pieces, got, want)
	}
	if reasoning.String() != want.Reasoning || content.String() != want.Content {
		t.Fatalf("%q in %q: deltas add up to (%q, %q), want (%q, %q)", completion, pieces, reasoning.String(), content.String(), want.Reasoning, want.Content)
	}
}

// FuzzQwen35Stream: for any completion and any split into pieces, the
// stream parser agrees with the batch parser.
func FuzzQwen35Stream(f *testing.F) {
	for _, s := range []string{
		"a </think> b <tool_call>\n<function=f>\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call><|im_end|>",
		" <think> \n x\n</think>\n\n y \n\n<tool_call>{\"name\": \"n\"}</tool_call> ",
		"<|endoftext|>", "<thin", "é\n\n<tool", "  <tool_call> junk",
	} {
		f.Add(s, true, uint64(1))
		f.Add(s, false, uint64(2))
	}
	f.Fuzz(func(t *testing.T, s string, thinking bool, seed uint64) {
		checkQwenStream(t, s, thinking, []Tool{qwenWeatherTool}, randomSplit(rand.New(rand.NewPCG(seed, 3)), s))
	})
}
