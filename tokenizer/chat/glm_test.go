package chat

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func glmTemplate(t testing.TB) *Template {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "glm-5", "chat_template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := NewTemplate(string(src))
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

// TestGLMTemplate: the template renders as worked out by hand from its
// text (transformers' Jinja environment trims a block tag's newline and
// the blanks before it).
func TestGLMTemplate(t *testing.T) {
	tmpl := glmTemplate(t)
	weather := Tool{Type: "function", Function: ToolFunction{Name: "get_weather", Description: "Weather of a city."}}
	tools := "<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
		`{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city."}}` + "\n" +
		"</tools>\n\nFor each function call, output the function name and arguments within the following XML format:\n" +
		"<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call>"
	tests := []struct {
		name     string
		msgs     []Message
		tools    []Tool
		thinking bool
		want     string
	}{
		{"thinking", []Message{{Role: RoleUser, Content: "Hello"}}, nil, true,
			"[gMASK]<sop><|user|>Hello<|assistant|><think>"},
		{"not thinking", []Message{{Role: RoleSystem, Content: "Be brief."}, {Role: RoleUser, Content: "Hello"}}, nil, false,
			"[gMASK]<sop><|system|>Be brief.<|user|>Hello<|assistant|></think>"},
		// Earlier turns lose their reasoning; the current turn's tool loop
		// keeps it; two results share one <|observation|>.
		{"tool loop", []Message{
			{Role: RoleUser, Content: "Hi"},
			{Role: RoleAssistant, Content: "Hello!", ReasoningContent: "greet"},
			{Role: RoleUser, Content: "Weather in Paris and Rome?"},
			{Role: RoleAssistant, Content: " Checking. ", ReasoningContent: " two calls ", ToolCalls: []ToolCall{
				{Name: "get_weather", Arguments: `{"city": "Paris", "days": 2}`}, {Name: "get_weather", Arguments: `{"city": "Rome"}`}}},
			{Role: RoleTool, Content: "Sunny"},
			{Role: RoleTool, Content: "Rain"},
		}, []Tool{weather}, true,
			"[gMASK]<sop>" + tools + "<|user|>Hi<|assistant|></think>Hello!<|user|>Weather in Paris and Rome?" +
				"<|assistant|><think>two calls</think>Checking." +
				"<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>2</arg_value></tool_call>" +
				"<tool_call>get_weather<arg_key>city</arg_key><arg_value>Rome</arg_value></tool_call>" +
				"<|observation|><tool_response>Sunny</tool_response><tool_response>Rain</tool_response><|assistant|><think>"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tmpl.Render(tc.msgs, tc.tools, true, map[string]any{"enable_thinking": tc.thinking})
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("prompt differs at byte %d\n got: %q\nwant: %q", firstDiff(got, tc.want), got, tc.want)
			}
		})
	}
}

func TestParseGLM(t *testing.T) {
	tools := []Tool{{Type: "function", Function: ToolFunction{Name: "get_weather", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}`)}}}
	tests := []struct {
		name       string
		completion string
		thinking   bool
		want       Parsed
		malformed  bool
	}{
		{"reasoning and content", "\nI think.\n</think>\nThe answer.\n<|user|>ignored", true, Parsed{Reasoning: "I think.", Content: "The answer."}, false},
		{"content only", "Just this.<|endoftext|>", false, Parsed{Content: "Just this."}, false},
		{"cut short", "still thinking", true, Parsed{Reasoning: "still thinking"}, false},
		{"typed call", "why</think>Let me see.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>5</arg_value>\n<arg_key>days</arg_key><arg_value>3</arg_value>\n</tool_call><|observation|>", true,
			Parsed{Reasoning: "why", Content: "Let me see.", ToolCalls: []ToolCall{{Name: "get_weather", Arguments: `{"city": "5", "days": 3}`}}}, false},
		{"untyped values", "<tool_call>f<arg_key>a</arg_key><arg_value>[1, 2]</arg_value><arg_key>b</arg_key><arg_value>x y</arg_value></tool_call><tool_call>g</tool_call>", false,
			Parsed{ToolCalls: []ToolCall{{Name: "f", Arguments: `{"a": [1, 2], "b": "x y"}`}, {Name: "g", Arguments: "{}"}}}, false},
		{"call without </think>", "planning <tool_call>g</tool_call>", true, Parsed{Reasoning: "planning", ToolCalls: []ToolCall{{Name: "g", Arguments: "{}"}}}, false},
		{"unclosed", "ok <tool_call>f<arg_key>a</arg_key><arg_value>1", false, Parsed{Content: "ok <tool_call>f<arg_key>a</arg_key><arg_value>1"}, true},
		{"text after", "<tool_call>g</tool_call> and more", false, Parsed{Content: "<tool_call>g</tool_call> and more"}, true},
		{"duplicate", "<tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value><arg_key>a</arg_key><arg_value>2</arg_value></tool_call>", false,
			Parsed{Content: "<tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value><arg_key>a</arg_key><arg_value>2</arg_value></tool_call>"}, true},
	}
	for _, tc := range tests {
		got, err := ParseGLM(tc.completion, tc.thinking, tools)
		if tc.malformed != errors.Is(err, ErrMalformedGLMToolCalls) || (!tc.malformed && err != nil) {
			t.Errorf("%s: error %v", tc.name, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %#v\nwant %#v", tc.name, got, tc.want)
		}
	}
	// A reply rendered by the template parses back into what it holds.
	tmpl := glmTemplate(t)
	msgs := []Message{{Role: RoleUser, Content: "q"}, {Role: RoleAssistant, ReasoningContent: "r", Content: "c", ToolCalls: []ToolCall{{Name: "get_weather", Arguments: `{"city": "Paris", "days": 2}`}}}}
	prompt, err := tmpl.Render(msgs, nil, false, map[string]any{"enable_thinking": true})
	if err != nil {
		t.Fatal(err)
	}
	reply := prompt[strings.Index(prompt, "<|assistant|><think>")+len("<|assistant|><think>"):]
	if got, err := ParseGLM(reply, true, tools); err != nil || got.Reasoning != "r" || got.Content != "c" || !reflect.DeepEqual(got.ToolCalls, msgs[1].ToolCalls) {
		t.Errorf("round trip of %q: %#v, %v", reply, got, err)
	}
}

// TestGLMStreamParser: fed in two pieces split at every byte, and byte by
// byte, the stream parser's deltas add up to ParseGLM's reply, and every
// delta is final (a prefix of it).
func TestGLMStreamParser(t *testing.T) {
	call := "<tool_call>f<arg_key>a</arg_key><arg_value>[1]</arg_value></tool_call>"
	for _, c := range []struct {
		text     string
		thinking bool
	}{
		{"  reasoning  </think>\n content \n\n" + call + "\n<|observation|>", true},
		{"r</think>c" + call + " trailing", true},
		{"reasoning then a call " + call, true},
		{"é世😀 a < b </thin <tool_ <|user", false},
		{"answer <|us", false},
		{"answer\n\n<|user|>more", false},
		{"  \n ", true},
		{"r</think>  <tool_call>f<arg_key>a", true},
	} {
		want, wantErr := ParseGLM(c.text, c.thinking, nil)
		check := func(pieces []string) {
			p := NewGLMStreamParser(c.thinking, nil)
			var r, cont string
			for _, piece := range pieces {
				dr, dc := p.Add(piece)
				r, cont = r+dr, cont+dc
				if !strings.HasPrefix(want.Reasoning, r) || (wantErr == nil && !strings.HasPrefix(want.Content, cont)) {
					t.Fatalf("%q in %q: after %q, deltas (%q, %q) are not prefixes of (%q, %q)", c.text, pieces, piece, r, cont, want.Reasoning, want.Content)
				}
			}
			dr, dc, got, err := p.Finish()
			r, cont = r+dr, cont+dc
			if (err != nil) != (wantErr != nil) || !reflect.DeepEqual(got, want) || r != want.Reasoning || cont != want.Content {
				t.Fatalf("%q in %q: stream (%q, %q) %#v %v, batch %#v %v", c.text, pieces, r, cont, got, err, want, wantErr)
			}
		}
		for k := 0; k <= len(c.text); k++ {
			check([]string{c.text[:k], c.text[k:]})
		}
		var bytes []string
		for i := range len(c.text) {
			bytes = append(bytes, c.text[i:i+1])
		}
		check(bytes)
	}
}
