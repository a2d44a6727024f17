package chat

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMiniMaxM3Template: the MiniMax-M3 chat template (after MiniMax-M2's
// format) renders a conversation with tools, an assistant turn with
// reasoning and a tool call, and the tool's result, exactly.
func TestMiniMaxM3Template(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "minimax-m3", "chat_template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := NewTemplate(string(src))
	if err != nil {
		t.Fatal(err)
	}
	tools := []Tool{{Type: "function", Function: ToolFunction{Name: "get_weather", Description: "Weather of a city."}}}
	msgs := []Message{
		{Role: RoleUser, Content: "Weather in Paris?"},
		{Role: RoleAssistant, ReasoningContent: "Ask the tool.", ToolCalls: []ToolCall{{Name: "get_weather", Arguments: `{"city": "Paris", "days": 2}`}}},
		{Role: RoleTool, Content: "sunny"},
	}
	got, err := tmpl.Render(msgs, tools, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "]~!b[]~b]system\nYou are a helpful assistant.\n\n# Tools\nYou may call one or more tools to assist with the user query.\n" +
		"Here are the tools available in JSONSchema format:\n\n<tools>\n" +
		`<tool>{"name": "get_weather", "description": "Weather of a city."}</tool>` + "\n</tools>\n\n" +
		"When making tool calls, use XML format to invoke tools and pass parameters:\n\n<minimax:tool_call>\n<invoke name=\"tool-name-1\">\n" +
		"<parameter name=\"param-key-1\">param-value-1</parameter>\n</invoke>\n</minimax:tool_call>[e~[\n" +
		"]~b]user\nWeather in Paris?[e~[\n" +
		"]~b]ai\n<think>\nAsk the tool.\n</think>\n\n\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n" +
		"<parameter name=\"city\">Paris</parameter>\n<parameter name=\"days\">2</parameter>\n</invoke>\n</minimax:tool_call>[e~[\n" +
		"]~b]tool\n<response>sunny</response>[e~[\n]~b]ai\n<think>\n"
	if got != want {
		t.Fatalf("rendered\n%q\nwant\n%q", got, want)
	}
}

// TestParseMiniMax: reasoning, content and typed tool calls of MiniMax
// replies, a malformed block's fallback, and the stream parser giving the
// same, in deltas, for every split of the reply.
func TestParseMiniMax(t *testing.T) {
	tools := []Tool{{Type: "function", Function: ToolFunction{Name: "get_weather",
		Parameters: []byte(`{"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "hourly": {"type": "boolean"}}}`)}}}
	for _, tc := range []struct {
		name, reply string
		thinking    bool
		want        Parsed
		bad         bool
	}{
		{"reasoning and content", "Let me think.\n</think>\n\nParis.[e~[ignored", true, Parsed{Reasoning: "Let me think.", Content: "Paris."}, false},
		{"repeated think", " <think>\nhm</think>ok", true, Parsed{Reasoning: "hm", Content: "ok"}, false},
		{"reasoning cut off", "still thinking </thi", true, Parsed{Reasoning: "still thinking </thi"}, false},
		{"no thinking", "Hello <b>there</b> ", false, Parsed{Content: "Hello <b>there</b>"}, false},
		{"tool call", "Need weather.</think>Checking.\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n" +
			"<parameter name=\"days\">2</parameter>\n<parameter name=\"hourly\">true</parameter>\n</invoke>\n<invoke name=\"get_weather\">\n" +
			"<parameter name=\"city\">Nice</parameter>\n</invoke>\n</minimax:tool_call>[e~[", true,
			Parsed{Reasoning: "Need weather.", Content: "Checking.", ToolCalls: []ToolCall{
				{Name: "get_weather", Arguments: `{"city": "Paris", "days": 2, "hourly": true}`}, {Name: "get_weather", Arguments: `{"city": "Nice"}`}}}, false},
		{"malformed", "r</think>text <minimax:tool_call><invoke name=\"x\"><parameter name=\"a\">1", true,
			Parsed{Reasoning: "r", Content: "text <minimax:tool_call><invoke name=\"x\"><parameter name=\"a\">1"}, true},
	} {
		got, err := ParseMiniMax(tc.reply, tc.thinking, tools)
		if (err != nil) != tc.bad || got.Reasoning != tc.want.Reasoning || got.Content != tc.want.Content || len(got.ToolCalls) != len(tc.want.ToolCalls) {
			t.Fatalf("%s: %#v, %v; want %#v", tc.name, got, err, tc.want)
		}
		for i, c := range got.ToolCalls {
			if c != tc.want.ToolCalls[i] {
				t.Fatalf("%s: call %d %#v, want %#v", tc.name, i, c, tc.want.ToolCalls[i])
			}
		}
		for step := 1; step <= len(tc.reply); step++ {
			p := NewMiniMaxStreamParser(tc.thinking, tools)
			var r, c string
			for i := 0; i < len(tc.reply); i += step {
				dr, dc := p.Add(tc.reply[i:min(i+step, len(tc.reply))])
				r, c = r+dr, c+dc
			}
			dr, dc, res, err2 := p.Finish()
			r, c = r+dr, c+dc
			if r != got.Reasoning || c != got.Content || (err2 != nil) != tc.bad || len(res.ToolCalls) != len(got.ToolCalls) {
				t.Fatalf("%s, pieces of %d: streamed reasoning %q content %q (%v), parsed %#v", tc.name, step, r, c, err2, got)
			}
		}
	}
}
