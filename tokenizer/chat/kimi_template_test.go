package chat

import (
	"os"
	"path/filepath"
	"testing"
)

// TestKimiTemplate: the Kimi chat template (testdata/kimi-linear, Kimi's
// <|im_*|> turns and tool-call sections) renders a conversation with a
// system turn, an assistant tool call, its result and a follow-up as the
// template writes it, the tool call's arguments a string passed through.
func TestKimiTemplate(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "kimi-linear", "chat_template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := NewTemplate(string(src))
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{
		{Role: RoleSystem, Content: "Be brief."},
		{Role: RoleUser, Content: "Weather in Paris?"},
		{Role: RoleAssistant, Content: "Checking.", ToolCalls: []ToolCall{{ID: "functions.get_weather:0", Name: "get_weather", Arguments: `{"city": "Paris"}`}}},
		{Role: RoleTool, Content: "Sunny, 21C", ToolCallID: "functions.get_weather:0"},
		{Role: RoleAssistant, Content: "Sunny."},
		{Role: RoleUser, Content: "Thanks"},
	}
	got, err := tmpl.Render(msgs, nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_system|>system<|im_middle|>Be brief.<|im_end|>" +
		"<|im_user|>user<|im_middle|>Weather in Paris?<|im_end|>" +
		"<|im_assistant|>assistant<|im_middle|>Checking.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|><|tool_calls_section_end|><|im_end|>" +
		"<|im_system|>tool<|im_middle|>## Return of functions.get_weather:0\nSunny, 21C<|im_end|>" +
		"<|im_assistant|>assistant<|im_middle|>Sunny.<|im_end|>" +
		"<|im_user|>user<|im_middle|>Thanks<|im_end|>" +
		"<|im_assistant|>assistant<|im_middle|>"
	if got != want {
		t.Fatalf("rendered\n%q\nwant\n%q", got, want)
	}
}
