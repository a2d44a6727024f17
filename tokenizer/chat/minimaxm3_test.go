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
