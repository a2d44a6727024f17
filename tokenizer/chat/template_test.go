package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func loadQwen3(t *testing.T) *Template {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "qwen3", "chat_template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := NewTemplate(string(src))
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

// TestTemplateQwen3 renders with Qwen3's template. The expected prompts
// were derived by hand from the template (testdata/qwen3/chat_template.jinja):
//
// Tools: the system turn is "<|im_start|>system\n", the system content and
// "\n\n", the "# Tools" preamble, each tool as "\n" + tojson(tool), and the
// <tool_call> instructions ending "<|im_end|>\n". The reverse scan sets
// last_query_index to the last user message (5), so no assistant turn
// before it shows reasoning. The first assistant turn has empty content, so
// its <tool_call> is not preceded by "\n"; its arguments are a dict, so they
// go through tojson. The tool result opens a user turn (the previous message
// is not a tool) and closes it (the next is not a tool). With
// enable_thinking false, the generation prompt is followed by an empty
// think block.
func TestTemplateQwen3(t *testing.T) {
	tmpl := loadQwen3(t)
	tools := []Tool{{Type: "function", Function: ToolFunction{
		Name:        "get_weather",
		Description: "Get the weather",
		Parameters:  json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}`),
	}}}
	msgs := []Message{
		{Role: "system", Content: "You are a helpful assistant."},
		{Role: "user", Content: "What's the weather in Paris?"},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
		{Role: "tool", ToolCallID: "call_1", Content: `{"temp": 18}`},
		{Role: "assistant", Content: "It is 18 degrees in Paris."},
		{Role: "user", Content: "Thanks!"},
	}
	got, err := tmpl.Render(msgs, tools, true, map[string]any{"enable_thinking": false})
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\nYou are a helpful assistant.\n\n" +
		"# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
		`{"type": "function", "function": {"name": "get_weather", "description": "Get the weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}` +
		"\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n" +
		"<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" +
		"<|im_start|>user\nWhat's the weather in Paris?<|im_end|>\n" +
		"<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n" +
		"<|im_start|>user\n<tool_response>\n{\"temp\": 18}\n</tool_response><|im_end|>\n" +
		"<|im_start|>assistant\nIt is 18 degrees in Paris.<|im_end|>\n" +
		"<|im_start|>user\nThanks!<|im_end|>\n" +
		"<|im_start|>assistant\n<think>\n\n</think>\n\n"
	if got != want {
		t.Errorf("differs at byte %d\n got: %q\nwant: %q", firstDiff(got, want), got, want)
	}
}

// TestTemplateQwen3Reasoning: without tools or a system message the prompt
// starts with the user turn. The assistant turn comes after the last user
// message and is the last, so it shows its reasoning, stripped of
// surrounding newlines, in a think block; no generation prompt follows.
func TestTemplateQwen3Reasoning(t *testing.T) {
	tmpl := loadQwen3(t)
	msgs := []Message{
		{Role: "user", Content: "2+2?"},
		{Role: "assistant", ReasoningContent: "\nAdd them.\n", Content: "\n4"},
	}
	got, err := tmpl.Render(msgs, nil, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\nAdd them.\n</think>\n\n4<|im_end|>\n"
	if got != want {
		t.Errorf("\n got: %q\nwant: %q", got, want)
	}
}

func TestNewTemplateFromConfig(t *testing.T) {
	cfg := `{"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>", "pad_token": null,
	         "chat_template": [{"name": "tool_use", "template": "x"},
	                           {"name": "default", "template": "{{ bos_token }}{% for m in messages %}{{ m.role }}:{{ m.content }}{% if not loop.last %}|{% endif %}{% endfor %}{{ eos_token }}"}]}`
	tmpl, err := NewTemplateFromConfig([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render([]Message{{Role: "user", Content: "a"}, {Role: "assistant", Content: "b"}}, nil, false, map[string]any{"eos_token": "<end>"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "<s>user:a|assistant:b<end>"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if _, err := NewTemplateFromConfig([]byte(`{"bos_token": "<s>"}`)); !errors.Is(err, ErrNoTemplate) {
		t.Errorf("no template: error %v", err)
	}
}

func TestTemplateErrors(t *testing.T) {
	if _, err := NewTemplate("{% if %}"); err == nil {
		t.Error("bad syntax compiled")
	}
	tmpl, err := NewTemplate(`{{ raise_exception("only user and assistant roles are supported") }}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmpl.Render(nil, nil, false, nil); err == nil || !strings.Contains(err.Error(), "only user and assistant") {
		t.Errorf("raise_exception: error %v", err)
	}
	tmpl, _ = NewTemplate(`{{ messages | length }}`)
	_, err = tmpl.Render([]Message{{Role: "assistant", ToolCalls: []ToolCall{{Name: "f", Arguments: "nope"}}}}, nil, false, nil)
	if err == nil || !strings.Contains(err.Error(), `tool call "f": arguments are not valid JSON`) {
		t.Errorf("bad arguments: error %v", err)
	}
}
