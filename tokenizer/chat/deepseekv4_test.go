package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// goldenCase loads testdata/deepseek-v4/input_N.json and output_N.txt,
// copies of ../shared/golden/deepseek-v4-chat. Input 1 is {messages, tools};
// the others are a bare message list.
func goldenCase(t testing.TB, n string) (msgs []Message, tools []Tool, want string) {
	t.Helper()
	in, err := os.ReadFile(filepath.Join("testdata", "deepseek-v4", "input_"+n+".json"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(filepath.Join("testdata", "deepseek-v4", "output_"+n+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(strings.TrimSpace(string(in)), "{") {
		var c struct {
			Messages []Message `json:"messages"`
			Tools    []Tool    `json:"tools"`
		}
		if err := json.Unmarshal(in, &c); err != nil {
			t.Fatal(err)
		}
		return c.Messages, c.Tools, string(out)
	}
	if err := json.Unmarshal(in, &msgs); err != nil {
		t.Fatal(err)
	}
	return msgs, nil, string(out)
}

func TestEncodeDeepSeekV4Golden(t *testing.T) {
	for _, tc := range []struct {
		name, n  string
		thinking bool
	}{
		{"tools on the system message, thinking", "1", true},
		{"earlier reasoning dropped, thinking", "2", true},
		{"developer with tools and latest_reminder, thinking", "3", true},
		{"quick instruction task and latest_reminder, chat", "4", false},
	} {
		t.Run(tc.n, func(t *testing.T) {
			msgs, tools, want := goldenCase(t, tc.n)
			got, err := EncodeDeepSeekV4(msgs, tools, Options{Thinking: tc.thinking})
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("%s: prompt differs at byte %d\n got: %q\nwant: %q", tc.name, firstDiff(got, want), got, want)
			}
		})
	}
}

func firstDiff(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestParseDeepSeekV4GoldenParseBack reads case 1's assistant turns back, as
// the reference's own test does: the text after "<｜Assistant｜><think>" up
// to the next user turn is what the model would have generated.
func TestParseDeepSeekV4GoldenParseBack(t *testing.T) {
	_, _, prompt := goldenCase(t, "1")
	const marker = tokAssistant + tokThinkStart
	start := strings.Index(prompt, marker) + len(marker)
	end := start + strings.Index(prompt[start:], tokUser)
	got, err := ParseDeepSeekV4(prompt[start:end], true)
	if err != nil {
		t.Fatal(err)
	}
	want := Parsed{
		Reasoning: "The user wants to know the weather in Beijing. I should use the get_weather tool.",
		ToolCalls: []ToolCall{{Name: "get_weather", Arguments: `{"location": "Beijing", "unit": "celsius"}`}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("first turn:\n got %+v\nwant %+v", got, want)
	}

	last := strings.LastIndex(prompt, marker) + len(marker)
	got, err = ParseDeepSeekV4(prompt[last:], true)
	if err != nil {
		t.Fatal(err)
	}
	want = Parsed{
		Reasoning: "Got the weather data. Let me format a nice response.",
		Content:   "The weather in Beijing is currently sunny with a temperature of 22°C and 45% humidity.",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("last turn:\n got %+v\nwant %+v", got, want)
	}
}

// dsmlCall writes one invoke element as the model would.
func dsmlCall(name string, params ...string) string {
	return dsmlInvoke + name + "\">\n" + strings.Join(params, "\n") + "\n" + dsmlInvokeEnd
}

func dsmlP(name, str, value string) string {
	return dsmlParam + name + `" string="` + str + `">` + value + dsmlParamEnd
}

func dsmlBlock(calls ...string) string {
	return dsmlToolCalls + "\n" + strings.Join(calls, "\n") + "\n" + dsmlToolCallsEnd
}

func TestEncodeDeepSeekV4Paths(t *testing.T) {
	schema := []Tool{{Type: "function", Function: ToolFunction{Name: "f", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}}
	for _, tc := range []struct {
		name  string
		msgs  []Message
		tools []Tool
		opt   Options
		want  string
	}{{
		name: "thinking, ends with the user: generation prompt <think>",
		msgs: []Message{{Role: "system", Content: "S"}, {Role: "user", Content: "Q"}},
		opt:  Options{Thinking: true},
		want: tokBOS + "S" + tokUser + "Q" + tokAssistant + tokThinkStart,
	}, {
		name: "chat, ends with the user: generation prompt </think>",
		msgs: []Message{{Role: "user", Content: "Q"}},
		want: tokBOS + tokUser + "Q" + tokAssistant + tokThinkEnd,
	}, {
		name:  "tools without a system message get an empty one",
		msgs:  []Message{{Role: "user", Content: "Q"}},
		tools: schema,
		want: tokBOS + "\n\n" + toolsSectionHead + `{"name": "f", "parameters": {"type": "object", "properties": {}}}` +
			toolsSectionTail + tokUser + "Q" + tokAssistant + tokThinkEnd,
	}, {
		name: "maximum reasoning effort",
		msgs: []Message{{Role: "user", Content: "Q"}},
		opt:  Options{Thinking: true, ReasoningEffort: "max"},
		want: tokBOS + reasoningEffortMaxPrefix + tokUser + "Q" + tokAssistant + tokThinkStart,
	}, {
		name: "maximum effort is for thinking mode only",
		msgs: []Message{{Role: "user", Content: "Q"}},
		opt:  Options{ReasoningEffort: "max"},
		want: tokBOS + tokUser + "Q" + tokAssistant + tokThinkEnd,
	}, {
		name: "kept reasoning",
		msgs: []Message{
			{Role: "user", Content: "Hello"},
			{Role: "assistant", ReasoningContent: "R1", Content: "Hi"},
			{Role: "user", Content: "Q"},
		},
		opt: Options{Thinking: true, KeepReasoning: true},
		want: tokBOS + tokUser + "Hello" + tokAssistant + tokThinkStart + "R1" + tokThinkEnd + "Hi" + tokEOS +
			tokUser + "Q" + tokAssistant + tokThinkStart,
	}, {
		name: "chat mode never shows reasoning",
		msgs: []Message{
			{Role: "user", Content: "Hello"},
			{Role: "assistant", ReasoningContent: "R1", Content: "Hi"},
		},
		want: tokBOS + tokUser + "Hello" + tokAssistant + tokThinkEnd + "Hi" + tokEOS,
	}, {
		name: "tool calls, results merged and ordered by call, earlier reasoning dropped",
		msgs: []Message{
			{Role: "user", Content: "Q"},
			{Role: "assistant", ReasoningContent: "dropped", ToolCalls: []ToolCall{
				{ID: "a", Name: "f", Arguments: `{"x": 1, "y": [true, null, 2.50, 1E2], "z": "s", "w": {"k":"<&>"}}`},
				{ID: "b", Name: "g", Arguments: ""},
			}},
			{Role: "tool", ToolCallID: "b", Content: "rb"},
			{Role: "tool", ToolCallID: "a", Content: "ra"},
		},
		opt: Options{Thinking: true},
		want: tokBOS + tokUser + "Q" + tokAssistant + tokThinkEnd +
			"\n\n" + dsmlBlock(
			dsmlCall("f", dsmlP("x", "false", "1"), dsmlP("y", "false", "[true, null, 2.5, 100.0]"),
				dsmlP("z", "true", "s"), dsmlP("w", "false", `{"k": "<&>"}`)),
			dsmlCall("g")) + tokEOS +
			tokUser + "<tool_result>ra</tool_result>\n\n<tool_result>rb</tool_result>" + tokAssistant + tokThinkStart,
	}, {
		name: "a user message after tool results joins their turn",
		msgs: []Message{
			{Role: "assistant", ToolCalls: []ToolCall{{ID: "a", Name: "f", Arguments: "{}"}}},
			{Role: "tool", ToolCallID: "a", Content: "r"},
			{Role: "user", Content: "and?"},
		},
		want: tokBOS + "\n\n" + dsmlBlock(dsmlCall("f")) + tokEOS +
			tokUser + "<tool_result>r</tool_result>\n\nand?" + tokAssistant + tokThinkEnd,
	}, {
		name: "assistant prefix without EOS",
		msgs: []Message{{Role: "user", Content: "Q"}, {Role: "assistant", Content: "A", WithoutEOS: true}},
		want: tokBOS + tokUser + "Q" + tokAssistant + tokThinkEnd + "A",
	}, {
		name: "a task other than action appends only its token",
		msgs: []Message{{Role: "user", Content: "Q", Task: "title"}},
		opt:  Options{Thinking: true},
		want: tokBOS + tokUser + "Q" + "<｜title｜>",
	}, {
		name: "action task in thinking mode",
		msgs: []Message{{Role: "user", Content: "Q", Task: "action"}, {Role: "assistant", ReasoningContent: "x", Content: "Search"}},
		opt:  Options{Thinking: true},
		want: tokBOS + tokUser + "Q" + tokAssistant + tokThinkStart + "<｜action｜>" + "Search" + tokEOS,
	}, {
		name: "response format on the system message",
		msgs: []Message{{Role: "system", Content: "S", ResponseFormat: json.RawMessage(`{"type":"json_object"}`)}},
		want: tokBOS + "S\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n" + `{"type": "json_object"}`,
	}, {
		name: "developer message before the last user is dropped in thinking mode",
		msgs: []Message{
			{Role: "developer", Content: "D"},
			{Role: "assistant", Content: "A"},
			{Role: "user", Content: "Q"},
		},
		opt:  Options{Thinking: true},
		want: tokBOS + "A" + tokEOS + tokUser + "Q" + tokAssistant + tokThinkStart,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EncodeDeepSeekV4(tc.msgs, tc.tools, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("differs at byte %d\n got: %q\nwant: %q", firstDiff(got, tc.want), got, tc.want)
			}
		})
	}
}

func TestEncodeDeepSeekV4Errors(t *testing.T) {
	tool := []Tool{{Type: "function", Function: ToolFunction{Name: "f"}}}
	for _, tc := range []struct {
		name  string
		msgs  []Message
		tools []Tool
		opt   Options
		want  string
	}{
		{"unknown role", []Message{{Role: "bot", Content: "x"}}, nil, Options{}, `unknown role "bot"`},
		{"empty developer", []Message{{Role: "developer"}}, nil, Options{}, "developer message needs content"},
		{"unknown task", []Message{{Role: "user", Task: "summarize"}}, nil, Options{}, `unknown task "summarize"`},
		{"arguments not JSON", []Message{{Role: "assistant", ToolCalls: []ToolCall{{Name: "f", Arguments: "{location: Paris}"}}}}, nil, Options{}, `tool call "f": arguments are not valid JSON`},
		{"arguments not an object", []Message{{Role: "assistant", ToolCalls: []ToolCall{{Name: "f", Arguments: "[1]"}}}}, nil, Options{}, `tool call "f": arguments are not a JSON object`},
		{"bad parameters", []Message{{Role: "system", Tools: []Tool{{Function: ToolFunction{Name: "f", Parameters: json.RawMessage("{")}}}}}, nil, Options{}, `parameters of tool "f"`},
		{"bad effort", []Message{{Role: "user"}}, nil, Options{ReasoningEffort: "low"}, "invalid reasoning effort"},
		{"tools twice", []Message{{Role: "system", Tools: tool}}, tool, Options{}, "tools given both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := EncodeDeepSeekV4(tc.msgs, tc.tools, tc.opt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestParseDeepSeekV4(t *testing.T) {
	call := dsmlBlock(dsmlCall("f", dsmlP("a", "false", `{"k": [1, 2]}`), dsmlP("b", "true", "say \"hi\"\nnow")))
	callArgs := `{"a": {"k": [1, 2]}, "b": "say \"hi\"\nnow"}`
	for _, tc := range []struct {
		name       string
		completion string
		thinking   bool
		want       Parsed
		malformed  bool
	}{
		{"chat", "Hello" + tokEOS, false, Parsed{Content: "Hello"}, false},
		{"no EOS", "Hello", false, Parsed{Content: "Hello"}, false},
		{"text after EOS ignored", "Hello" + tokEOS + "junk</think>", false, Parsed{Content: "Hello"}, false},
		{"thinking", "why</think>because" + tokEOS, true, Parsed{Reasoning: "why", Content: "because"}, false},
		{"no </think>: cut short while reasoning", "why and", true, Parsed{Reasoning: "why and"}, false},
		{"EOS before </think>", "why" + tokEOS + "</think>x", true, Parsed{Reasoning: "why"}, false},
		{"</think> in chat mode is content", "a</think>b", false, Parsed{Content: "a</think>b"}, false},
		{"second </think> is content", "r</think>a</think>b", true, Parsed{Reasoning: "r", Content: "a</think>b"}, false},
		{"tool call", "r</think>Let me look.\n\n" + call + tokEOS, true,
			Parsed{Reasoning: "r", Content: "Let me look.", ToolCalls: []ToolCall{{Name: "f", Arguments: callArgs}}}, false},
		{"tool call without the blank line", "x" + call, false,
			Parsed{Content: "x", ToolCalls: []ToolCall{{Name: "f", Arguments: callArgs}}}, false},
		{"only one blank line is the separator", "x\n\n\n" + call, false,
			Parsed{Content: "x\n", ToolCalls: []ToolCall{{Name: "f", Arguments: callArgs}}}, false},
		{"two calls, free blank space", "\n\n" + dsmlToolCalls + "\n\n" + dsmlCall("f") + "\n  " + dsmlCall("g", dsmlP("n", "false", " 3 ")) + "\n" + dsmlToolCallsEnd + "\n", false,
			Parsed{ToolCalls: []ToolCall{{Name: "f", Arguments: "{}"}, {Name: "g", Arguments: `{"n": 3}`}}}, false},
		{"string=false that is not JSON is a string", dsmlBlock(dsmlCall("f", dsmlP("city", "false", "Paris"))), false,
			Parsed{ToolCalls: []ToolCall{{Name: "f", Arguments: `{"city": "Paris"}`}}}, false},
		{"empty block", dsmlToolCalls + "\n" + dsmlToolCallsEnd, false, Parsed{}, false},
		{"unclosed block", "x\n\n" + dsmlToolCalls + "\n" + dsmlCall("f"), false, Parsed{Content: "x\n\n" + dsmlToolCalls + "\n" + dsmlCall("f")}, true},
		{"unclosed parameter", dsmlToolCalls + "\n" + dsmlInvoke + "f\">\n" + dsmlParam + `a" string="true">v`, false,
			Parsed{Content: dsmlToolCalls + "\n" + dsmlInvoke + "f\">\n" + dsmlParam + `a" string="true">v`}, true},
		{"duplicate parameter", dsmlBlock(dsmlCall("f", dsmlP("a", "true", "1"), dsmlP("a", "true", "2"))), false,
			Parsed{Content: dsmlBlock(dsmlCall("f", dsmlP("a", "true", "1"), dsmlP("a", "true", "2")))}, true},
		{"bad string attribute", dsmlBlock(dsmlCall("f", dsmlP("a", "yes", "1"))), false,
			Parsed{Content: dsmlBlock(dsmlCall("f", dsmlP("a", "yes", "1")))}, true},
		{"unknown element", "r</think>" + "<｜DSML｜function_calls>", true,
			Parsed{Reasoning: "r", Content: "<｜DSML｜function_calls>"}, true},
		{"text after the block", "r</think>" + call + "\nmore", true,
			Parsed{Reasoning: "r", Content: call + "\nmore"}, true},
		{"tool call without </think> ends the reasoning", "I will look it up.\n\n" + call + tokEOS, true,
			Parsed{Reasoning: "I will look it up.", ToolCalls: []ToolCall{{Name: "f", Arguments: callArgs}}}, false},
		{"tool call without </think>, </think> later", "r" + call + "</think>x", true,
			Parsed{Reasoning: "r", Content: call + "</think>x"}, true},
		{"malformed tool call without </think>", "r\n\n" + dsmlToolCalls + "\n" + dsmlCall("f"), true,
			Parsed{Reasoning: "r", Content: "\n\n" + dsmlToolCalls + "\n" + dsmlCall("f")}, true},
		{"a DSML tag other than the block opener stays in the reasoning", "r <｜DSML｜invoke x</think>c", true,
			Parsed{Reasoning: "r <｜DSML｜invoke x", Content: "c"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseDeepSeekV4(tc.completion, tc.thinking)
			if tc.malformed != (err != nil) || (err != nil && !errors.Is(err, ErrMalformedToolCalls)) {
				t.Fatalf("error %v, want malformed=%v", err, tc.malformed)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("\n got %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

// TestDeepSeekV4RoundTrip encodes assistant turns and reads them back.
func TestDeepSeekV4RoundTrip(t *testing.T) {
	for _, args := range []string{
		`{}`,
		`{"s": "plain"}`,
		`{"s": "quotes \" and \\ and\nnewlines\t<tags> & ünïcødé 世界 \u2028"}`,
		`{"n": 0, "neg": -12, "big": 123456789012345678901234567890, "f": 1.5, "e": 1e-07, "g": 1E+22, "z": -0.0}`,
		`{"b": true, "nil": null, "arr": [1, "two", [3.0], {"four": 4}], "obj": {"nested": {"deep": []}}}`,
		`{"empty": "", "space": "  padded  "}`,
	} {
		msgs := []Message{
			{Role: "user", Content: "Q"},
			{Role: "assistant", ReasoningContent: "think", Content: "ok", ToolCalls: []ToolCall{{Name: "tool", Arguments: args}}},
		}
		prompt, err := EncodeDeepSeekV4(msgs, nil, Options{Thinking: true})
		if err != nil {
			t.Fatal(err)
		}
		completion := prompt[strings.Index(prompt, tokThinkStart)+len(tokThinkStart):]
		got, err := ParseDeepSeekV4(completion, true)
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		v, _ := parseJSON([]byte(args))
		want := Parsed{Reasoning: "think", Content: "ok", ToolCalls: []ToolCall{{Name: "tool", Arguments: pyJSON(v)}}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %#v\nwant %#v", args, got, want)
		}
		var a, b any
		if err := json.Unmarshal([]byte(args), &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(got.ToolCalls[0].Arguments), &b); err != nil {
			t.Fatalf("%s: parsed arguments are not JSON: %v", args, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: arguments changed meaning: %v", args, b)
		}
	}
}
