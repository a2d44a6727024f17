package chat

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// The expected prompts below are written out by hand from DeepSeek's
// reference encoder for DeepSeek-V3.2 (encoding/encoding_dsv32.py of the
// Hub repository, encode_messages with add_default_bos_token), template by
// template.

const (
	bos32   = "<｜begin▁of▁sentence｜>"
	eos32   = "<｜end▁of▁sentence｜>"
	user32  = "<｜User｜>"
	asst32  = "<｜Assistant｜>"
	fcOpen  = "<｜DSML｜function_calls>"
	fcClose = "</｜DSML｜function_calls>"
)

var weatherTool = Tool{Type: "function", Function: ToolFunction{Name: "get_weather", Description: "Get weather for a city."}}

// v32Tools is the tools section for weatherTool.
func v32Tools() string {
	return "## Tools\n\n" +
		"You have access to a set of tools you can use to answer the user's question.\n" +
		"You can invoke functions by writing a \"<｜DSML｜function_calls>\" block like the following as part of your reply to the user:\n" +
		"<｜DSML｜function_calls>\n" +
		"<｜DSML｜invoke name=\"$FUNCTION_NAME\">\n" +
		"<｜DSML｜parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</｜DSML｜parameter>\n" +
		"...\n" +
		"</｜DSML｜invoke>\n" +
		"<｜DSML｜invoke name=\"$FUNCTION_NAME2\">\n" +
		"...\n" +
		"</｜DSML｜invoke>\n" +
		"</｜DSML｜function_calls>\n\n" +
		"String and scalar parameters should be specified as is without any escaping or quotes, while lists and objects should use JSON format. The \"string\" attribute should be set to \"true\" for string type parameters and \"false\" for other types (numbers, booleans, arrays, objects).\n\n" +
		"If the thinking_mode is enabled, then after function results you should strongly consider outputting a thinking block. Here is an example:\n\n" +
		"<｜DSML｜function_calls>\n" +
		"...\n" +
		"</｜DSML｜function_calls>\n\n" +
		"<function_results>\n" +
		"...\n" +
		"</function_results>\n\n" +
		"<think>...thinking about results</think>\n\n" +
		"Here are the functions available in JSONSchema format:\n" +
		"<functions>\n" +
		`{"name": "get_weather", "description": "Get weather for a city."}` + "\n" +
		"</functions>\n"
}

func TestEncodeDeepSeekV32(t *testing.T) {
	call := ToolCall{ID: "c1", Name: "get_weather", Arguments: `{"city": "Paris", "days": 2}`}
	call2 := ToolCall{ID: "c2", Name: "get_weather", Arguments: `{"city": "Rome"}`}
	invoke := func(city string, days string) string {
		s := "<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">" + city + "</｜DSML｜parameter>"
		if days != "" {
			s += "\n<｜DSML｜parameter name=\"days\" string=\"false\">" + days + "</｜DSML｜parameter>"
		}
		return s + "\n</｜DSML｜invoke>"
	}
	tests := []struct {
		name  string
		msgs  []Message
		tools []Tool
		opt   Options
		want  string
	}{
		{"chat", []Message{{Role: RoleUser, Content: "Hello"}}, nil, Options{},
			bos32 + user32 + "Hello" + asst32 + "</think>"},
		{"thinking", []Message{{Role: RoleUser, Content: "Hello"}}, nil, Options{Thinking: true},
			bos32 + user32 + "Hello" + asst32 + "<think>"},
		// Earlier turns close their thinking; the earlier reasoning is
		// dropped (and would not be shown before the last user message
		// anyway).
		{"multi-turn thinking", []Message{
			{Role: RoleSystem, Content: "You are a helpful assistant."},
			{Role: RoleUser, Content: "hello"},
			{Role: RoleAssistant, Content: "Hello! I am DeepSeek.", ReasoningContent: "thinking..."},
			{Role: RoleUser, Content: "1+1=?"},
		}, nil, Options{Thinking: true},
			bos32 + "You are a helpful assistant." + user32 + "hello" + asst32 + "</think>Hello! I am DeepSeek." + eos32 + user32 + "1+1=?" + asst32 + "<think>"},
		// Tools on the system message; a call, its result, and the
		// assistant's continuation reopening its thinking.
		{"tool loop, thinking", []Message{
			{Role: RoleSystem, Content: "You may call tools."},
			{Role: RoleUser, Content: "Weather in Paris and Rome?"},
			{Role: RoleAssistant, ReasoningContent: "Two calls.", ToolCalls: []ToolCall{call, call2}},
			{Role: RoleTool, ToolCallID: "c1", Content: "Sunny"},
			{Role: RoleTool, ToolCallID: "c2", Content: "Rain"},
		}, []Tool{weatherTool}, Options{Thinking: true},
			bos32 + "You may call tools.\n\n" + v32Tools() + user32 + "Weather in Paris and Rome?" + asst32 + "<think>" +
				"Two calls.</think>\n\n" + fcOpen + "\n" + invoke("Paris", "2") + "\n" + invoke("Rome", "") + "\n" + fcClose + eos32 +
				"\n\n<function_results>\n<result>Sunny</result>\n<result>Rain</result>\n</function_results>\n\n<think>"},
		// Chat mode: the same loop closes thinking everywhere and shows no
		// reasoning; the tools go on an empty system message.
		{"tool loop, chat", []Message{
			{Role: RoleUser, Content: "Weather in Paris?"},
			{Role: RoleAssistant, ReasoningContent: "hidden", ToolCalls: []ToolCall{call}},
			{Role: RoleTool, Content: "Sunny"},
			{Role: RoleAssistant, Content: "It is sunny."},
		}, []Tool{weatherTool}, Options{},
			bos32 + "\n\n" + v32Tools() + user32 + "Weather in Paris?" + asst32 + "</think>" +
				"\n\n" + fcOpen + "\n" + invoke("Paris", "2") + "\n" + fcClose + eos32 +
				"\n\n<function_results>\n<result>Sunny</result>\n</function_results>\n\n</think>It is sunny." + eos32},
		// A developer message carries tools and the user's message; an
		// earlier developer message is dropped in thinking mode, with the
		// assistant opening it wrote (the reference's quirk).
		{"developer", []Message{
			{Role: RoleDeveloper, Content: "first"},
			{Role: RoleAssistant, Content: "ok"},
			{Role: RoleDeveloper, Content: "What now?", Tools: []Tool{weatherTool}},
		}, nil, Options{Thinking: true},
			bos32 + "ok" + eos32 + user32 + "\n\n" + v32Tools() + "\n\n# The user's message is: What now?" + asst32 + "<think>"},
		{"keep reasoning", []Message{
			{Role: RoleUser, Content: "a"},
			{Role: RoleAssistant, Content: "b", ReasoningContent: "r"},
			{Role: RoleUser, Content: "c"},
		}, nil, Options{Thinking: true, KeepReasoning: true},
			bos32 + user32 + "a" + asst32 + "</think>b" + eos32 + user32 + "c" + asst32 + "<think>"},
		{"response format", []Message{{Role: RoleSystem, ResponseFormat: []byte(`{"type":"object"}`)}, {Role: RoleUser, Content: "x"}}, nil, Options{},
			bos32 + "\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n" + `{"type": "object"}` + user32 + "x" + asst32 + "</think>"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EncodeDeepSeekV32(tc.msgs, tc.tools, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("prompt differs at byte %d\n got: %q\nwant: %q", firstDiff(got, tc.want), got, tc.want)
			}
		})
	}
}

func TestEncodeDeepSeekV32Errors(t *testing.T) {
	for _, tc := range []struct {
		name string
		msgs []Message
		opt  Options
		want string
	}{
		{"reminder", []Message{{Role: RoleLatestReminder, Content: "x"}}, Options{}, `unknown role "latest_reminder"`},
		{"task", []Message{{Role: RoleUser, Content: "x", Task: "title"}}, Options{}, "no quick instruction tasks"},
		{"orphan result", []Message{{Role: RoleUser, Content: "x"}, {Role: RoleTool, Content: "r"}}, Options{}, "tool result without a matching tool call"},
		{"extra result", []Message{{Role: RoleUser, Content: "x"}, {Role: RoleAssistant, ToolCalls: []ToolCall{{Name: "f", Arguments: "{}"}}},
			{Role: RoleTool, Content: "r"}, {Role: RoleTool, Content: "s"}}, Options{}, "tool result without a matching tool call"},
		{"no reasoning", []Message{{Role: RoleUser, Content: "x"}, {Role: RoleAssistant, Content: "y"}}, Options{Thinking: true}, "needs reasoning or tool calls"},
		{"effort", []Message{{Role: RoleUser, Content: "x"}}, Options{ReasoningEffort: "max"}, "no reasoning effort"},
		{"bad arguments", []Message{{Role: RoleAssistant, ToolCalls: []ToolCall{{Name: "f", Arguments: "[1]"}}}}, Options{}, "chat:"},
	} {
		_, err := EncodeDeepSeekV32(tc.msgs, nil, tc.opt)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestParseDeepSeekV32: replies read back as the reference's
// parse_message_from_completion_text reads them, the tool-call block
// being function_calls (a V4 tool_calls block is not one).
func TestParseDeepSeekV32(t *testing.T) {
	completion := "I should call a tool.</think>\n\n" + fcOpen + "\n" +
		"<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n" +
		"<｜DSML｜parameter name=\"days\" string=\"false\">2</｜DSML｜parameter>\n</｜DSML｜invoke>\n" + fcClose + eos32
	p, err := ParseDeepSeekV32(completion, true)
	if err != nil {
		t.Fatal(err)
	}
	want := Parsed{Reasoning: "I should call a tool.", ToolCalls: []ToolCall{{Name: "get_weather", Arguments: `{"city": "Paris", "days": 2}`}}}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("got %#v\nwant %#v", p, want)
	}
	if p, err := ParseDeepSeekV32("Just text."+eos32, false); err != nil || p.Content != "Just text." || p.ToolCalls != nil {
		t.Fatalf("plain reply: %#v, %v", p, err)
	}
	v4 := "c\n\n<｜DSML｜tool_calls>\n</｜DSML｜tool_calls>"
	if _, err := ParseDeepSeekV32(v4, false); !errors.Is(err, ErrMalformedToolCalls) {
		t.Fatalf("a V4 block read as V3.2's: %v", err)
	}
	// A prompt's assistant turn parses back into what was encoded.
	msgs := []Message{{Role: RoleUser, Content: "q"}, {Role: RoleAssistant, ReasoningContent: "why", Content: "answer", ToolCalls: []ToolCall{{Name: "f", Arguments: `{"x": [1, 2], "y": "s"}`}}}}
	prompt, err := EncodeDeepSeekV32(msgs, nil, Options{Thinking: true})
	if err != nil {
		t.Fatal(err)
	}
	reply := prompt[strings.Index(prompt, "<think>")+len("<think>"):]
	got, err := ParseDeepSeekV32(reply, true)
	if err != nil || got.Reasoning != "why" || got.Content != "answer" || len(got.ToolCalls) != 1 || got.ToolCalls[0].Arguments != `{"x": [1, 2], "y": "s"}` {
		t.Fatalf("round trip: %#v, %v", got, err)
	}
}

// TestDeepSeekV32StreamParser: streaming, split at every byte, gives what
// ParseDeepSeekV32 gives.
func TestDeepSeekV32StreamParser(t *testing.T) {
	call := fcOpen + "\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"false\">[1]</｜DSML｜parameter>\n</｜DSML｜invoke>\n" + fcClose
	for _, c := range []struct {
		text     string
		thinking bool
	}{
		{"r</think>content\n\n" + call + eos32, true},
		{"reasoning then a call\n\n" + call, true},
		{"c <｜DSML｜function_call not quite\n\n" + call, false},
		{"plain" + eos32 + "after", false},
	} {
		want, wantErr := ParseDeepSeekV32(c.text, c.thinking)
		for k := 0; k <= len(c.text); k++ {
			p := NewDeepSeekV32StreamParser(c.thinking)
			r1, c1 := p.Add(c.text[:k])
			r2, c2 := p.Add(c.text[k:])
			r3, c3, got, err := p.Finish()
			if (err != nil) != (wantErr != nil) || !reflect.DeepEqual(got, want) || r1+r2+r3 != want.Reasoning || c1+c2+c3 != want.Content {
				t.Fatalf("%q split at %d: %#v (%v), want %#v (%v)", c.text, k, got, err, want, wantErr)
			}
		}
	}
}
