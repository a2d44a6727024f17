package chat

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

func gemma4Template(t testing.TB) *Template {
	t.Helper()
	src, err := os.ReadFile("testdata/gemma4/chat_template.jinja")
	if err != nil {
		t.Fatal(err)
	}
	tm, err := NewTemplate(string(src))
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

var gemmaWeatherTool = Tool{Type: "function", Function: ToolFunction{Name: "get_weather", Description: "Weather of a city",
	Parameters: json.RawMessage(`{"type": "object", "properties": {"unit": {"type": "string", "enum": ["c", "f"]}, "city": {"type": "string", "description": "the city"}}, "required": ["city"]}`)}}

// TestGemma4Render: prompts as the template's text says they render,
// worked out by hand: the system turn (thinking switch, system prompt,
// tool declarations with keys sorted and types upper-cased), the turns,
// an assistant's tool calls with their results following in the same
// turn, and the generation prompt, which closes an empty thought channel
// when thinking is off and leaves the channel to the model when it is on.
func TestGemma4Render(t *testing.T) {
	tm := gemma4Template(t)
	vars := func(thinking bool) map[string]any {
		return map[string]any{"bos_token": "<bos>", "enable_thinking": thinking}
	}
	cases := []struct {
		name     string
		msgs     []Message
		tools    []Tool
		thinking bool
		want     string
	}{
		{
			name: "chat",
			msgs: []Message{{Role: RoleUser, Content: " Hello! "}},
			want: "<bos><|turn>user\nHello!<turn|>\n<|turn>model\n<|channel>thought\n<channel|>",
		},
		{
			name:     "thinking, system, earlier answer",
			thinking: true,
			msgs: []Message{{Role: RoleSystem, Content: "Be brief."}, {Role: RoleUser, Content: "2+2?"},
				{Role: RoleAssistant, Content: "<|channel>thought\nsimple<channel|>4", ReasoningContent: "simple"}, {Role: RoleUser, Content: "3+3?"}},
			want: "<bos><|turn>system\n<|think|>\nBe brief.<turn|>\n<|turn>user\n2+2?<turn|>\n<|turn>model\n4<turn|>\n<|turn>user\n3+3?<turn|>\n<|turn>model\n",
		},
		{
			name:  "tools",
			tools: []Tool{gemmaWeatherTool},
			msgs: []Message{{Role: RoleUser, Content: "Weather in Paris?"},
				{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "get_weather", Arguments: `{"unit": "c", "city": "Paris", "days": 2, "opts": {"hourly": true, "at": [6, 18]}}`}}},
				{Role: RoleTool, ToolCallID: "c1", Content: "sunny, 21"}},
			want: "<bos><|turn>system\n<|tool>declaration:get_weather{description:<|\"|>Weather of a city<|\"|>,parameters:{properties:{" +
				"city:{description:<|\"|>the city<|\"|>,type:<|\"|>STRING<|\"|>},unit:{enum:[<|\"|>c<|\"|>,<|\"|>f<|\"|>],type:<|\"|>STRING<|\"|>}}," +
				"required:[<|\"|>city<|\"|>],type:<|\"|>OBJECT<|\"|>}}<tool|><turn|>\n" +
				"<|turn>user\nWeather in Paris?<turn|>\n" +
				"<|turn>model\n<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:2,opts:{at:[6,18],hourly:true},unit:<|\"|>c<|\"|>}<tool_call|>" +
				"<|tool_response>response:get_weather{value:<|\"|>sunny, 21<|\"|>}<tool_response|>",
		},
	}
	for _, c := range cases {
		got, err := tm.Render(c.msgs, c.tools, true, vars(c.thinking))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
	p, _ := tm.Render(cases[0].msgs, nil, true, vars(true))
	if Gemma4InThought(p) || !strings.HasSuffix(p, "<|turn>model\n") {
		t.Errorf("thinking prompt %q: the reply should open the thought channel itself", p)
	}
}

// gemmaParseCases are completions and what ParseGemma4 reads from them.
var gemmaParseCases = []struct {
	name       string
	completion string
	thinking   bool
	want       Parsed
	malformed  bool
}{
	{name: "content", completion: "  The answer is 4. \n<turn|>ignored", want: Parsed{Content: "The answer is 4."}},
	{name: "cut short", completion: "The answer", want: Parsed{Content: "The answer"}},
	{name: "thought channel", completion: "<|channel>thought\nAdd them.\n<channel|>Four.<turn|>", want: Parsed{Reasoning: "Add them.", Content: "Four."}},
	{name: "reasoning cut short", completion: "<|channel>thought\nLet me", want: Parsed{Reasoning: "Let me"}},
	{name: "inside the channel", thinking: true, completion: "Add them.<channel|>\nFour.<eos>", want: Parsed{Reasoning: "Add them.", Content: "Four."}},
	{name: "empty channel", completion: "<|channel>thought\n<channel|>Hi.", want: Parsed{Content: "Hi."}},
	{
		name:       "tool call",
		completion: `<|tool_call>call:get_weather{city:<|"|>Paris, "FR"<|"|>,days:2,opts:{at:[6,18.5,-1e3],hourly:true,note:null},unit:<|"|>c<|"|>}<tool_call|><|tool_response>`,
		want:       Parsed{ToolCalls: []ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris, \"FR\"","days":2,"opts":{"at":[6,18.5,-1e3],"hourly":true,"note":null},"unit":"c"}`}}},
	},
	{
		name:       "content, two calls, content",
		completion: "Checking.\n<|tool_call>call:a{}<tool_call|>\n<|tool_call>call:b.c{x:<|\"|><b>&<|\"|>,y:[<|\"|>p<|\"|>,{q:1}],z:plain}<tool_call|> Done.<turn|>",
		want: Parsed{Content: "Checking.\n\nDone.", ToolCalls: []ToolCall{{Name: "a", Arguments: `{}`},
			{Name: "b.c", Arguments: `{"x":"<b>&","y":["p",{"q":1}],"z":"plain"}`}}},
	},
	{name: "quoted keys", completion: `<|tool_call>call:f{<|"|>k<|"|>:1}<tool_call|>`, want: Parsed{ToolCalls: []ToolCall{{Name: "f", Arguments: `{"k":1}`}}}},
	{name: "no value", completion: "Hm <|tool_call>call:f{a:}<tool_call|>", want: Parsed{Content: "Hm <|tool_call>call:f{a:}<tool_call|>"}, malformed: true},
	{name: "not a call", completion: "<|tool_call>get{a:1}<tool_call|>", want: Parsed{Content: "<|tool_call>get{a:1}<tool_call|>"}, malformed: true},
	{name: "unclosed", completion: "<|tool_call>call:f{a:<|\"|>x", want: Parsed{Content: "<|tool_call>call:f{a:<|\"|>x"}, malformed: true},
}

func TestParseGemma4(t *testing.T) {
	for _, c := range gemmaParseCases {
		got, err := ParseGemma4(c.completion, c.thinking)
		if c.malformed != errors.Is(err, ErrMalformedGemma4ToolCalls) {
			t.Errorf("%s: error %v", c.name, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
		for _, tc := range got.ToolCalls {
			if !json.Valid([]byte(tc.Arguments)) {
				t.Errorf("%s: arguments %s are not JSON", c.name, tc.Arguments)
			}
		}
	}
}

// streamGemma feeds completion to a stream parser in pieces of the given
// sizes (cycled) and returns the concatenated deltas and Finish's result.
func streamGemma(completion string, thinking bool, sizes []int) (reasoning, content string, res Parsed, err error) {
	p := NewGemma4StreamParser(thinking)
	for i, k := 0, 0; i < len(completion); k++ {
		n := min(sizes[k%len(sizes)], len(completion)-i)
		r, c := p.Add(completion[i : i+n])
		reasoning += r
		content += c
		i += n
	}
	r, c, res, err := p.Finish()
	return reasoning + r, content + c, res, err
}

// TestGemma4Stream: every split of every completion streams the same
// reasoning and content ParseGemma4 reads, never emits markup, and ends with
// the same Parsed and error.
func TestGemma4Stream(t *testing.T) {
	for _, c := range gemmaParseCases {
		want, werr := ParseGemma4(c.completion, c.thinking)
		for _, sizes := range [][]int{{1}, {2}, {3, 1}, {5}, {7, 2, 11}, {len(c.completion)}} {
			r, ct, res, err := streamGemma(c.completion, c.thinking, sizes)
			if r != want.Reasoning || ct != want.Content || !reflect.DeepEqual(res, want) || (err == nil) != (werr == nil) {
				t.Fatalf("%s in pieces of %v: streamed %q / %q, %+v, %v; want %+v, %v", c.name, sizes, r, ct, res, err, want, werr)
			}
		}
		// No markup in the deltas of a well-formed reply, piece by piece.
		if !c.malformed {
			p := NewGemma4StreamParser(c.thinking)
			for i := range len(c.completion) {
				r, ct := p.Add(c.completion[i : i+1])
				if strings.Contains(r+ct, "<|") || strings.Contains(r+ct, "|>") {
					t.Fatalf("%s: delta %q / %q holds markup", c.name, r, ct)
				}
			}
		}
	}
}

// TestGemma4ToolCallRoundTrip: tool calls the template renders read back
// as the same calls (the template sorts the keys).
func TestGemma4ToolCallRoundTrip(t *testing.T) {
	tm := gemma4Template(t)
	calls := []ToolCall{
		{Name: "get_weather", Arguments: `{"city": "São Paulo", "days": 3, "hourly": false, "at": [6, 18], "opts": {"units": "metric", "tags": ["a", "b"]}}`},
		{Name: "noop", Arguments: `{}`},
	}
	msgs := []Message{{Role: RoleUser, Content: "hi"}, {Role: RoleAssistant, ToolCalls: calls}}
	prompt, err := tm.Render(msgs, []Tool{gemmaWeatherTool}, false, map[string]any{"bos_token": "<bos>"})
	if err != nil {
		t.Fatal(err)
	}
	i := strings.LastIndex(prompt, "<|turn>model\n")
	got, err := ParseGemma4(prompt[i+len("<|turn>model\n"):], false)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.ToolCalls) != len(calls) {
		t.Fatalf("read back %+v from %q", got, prompt[i:])
	}
	for k, c := range calls {
		var a, b any
		json.Unmarshal([]byte(c.Arguments), &a)
		json.Unmarshal([]byte(got.ToolCalls[k].Arguments), &b)
		if got.ToolCalls[k].Name != c.Name || !reflect.DeepEqual(a, b) {
			t.Errorf("call %d: read back %+v, rendered %+v", k, got.ToolCalls[k], c)
		}
	}
}

// FuzzParseGemma4: the parser never panics, its calls' arguments are JSON
// objects, and streaming in any pieces agrees with parsing at once.
func FuzzParseGemma4(f *testing.F) {
	for _, c := range gemmaParseCases {
		f.Add(c.completion, c.thinking, uint8(3))
	}
	f.Fuzz(func(t *testing.T, completion string, thinking bool, piece uint8) {
		want, werr := ParseGemma4(completion, thinking)
		for _, tc := range want.ToolCalls {
			var m map[string]any
			if err := json.Unmarshal([]byte(tc.Arguments), &m); err != nil {
				t.Fatalf("arguments %q: %v", tc.Arguments, err)
			}
		}
		r, c, res, err := streamGemma(completion, thinking, []int{int(piece%16) + 1})
		if r != want.Reasoning || c != want.Content || !reflect.DeepEqual(res, want) || (err == nil) != (werr == nil) {
			t.Fatalf("streamed %q / %q, %+v, %v; parsed %+v, %v", r, c, res, err, want, werr)
		}
	})
}
