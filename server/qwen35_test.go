package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/strata-inference/strata/engine"
	"github.com/strata-inference/strata/tokenizer"
	"github.com/strata-inference/strata/tokenizer/chat"
)

// qwenTemplate is Qwen3.5's chat template, as the released checkpoints
// ship it (the chat package's test copy).
func qwenTemplate(t *testing.T) *chat.Template {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "tokenizer", "chat", "testdata", "qwen3.5", "chat_template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tm, err := chat.NewTemplate(string(src))
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// newQwenHarness serves a scripted model through the Qwen35 chat format:
// it answers the chat of msgs and tools (in the given thinking mode) with
// reply, tokenized by the test tokenizer as the engine would generate it,
// then EOS.
func newQwenHarness(t *testing.T, msgs []chat.Message, tools []chat.Tool, thinking bool, reply string) *harness {
	t.Helper()
	tok, err := tokenizer.LoadDir(testModelDir)
	if err != nil {
		t.Fatal(err)
	}
	format := Qwen35(qwenTemplate(t))
	prompt, err := format.Render(msgs, tools, ChatOptions{Thinking: thinking})
	if err != nil {
		t.Fatal(err)
	}
	// The reply starts after the prompt's last tokens, as the server
	// encodes it.
	ids := tok.Encode(prompt, true)
	marker := ids[len(ids)-8:]
	eos := tok.EOS()
	m := &scriptedModel{vocab: tok.VocabSize(), script: replyScript(marker, tok.Encode(reply, true), eos)}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := engine.New(m, engine.Config{MaxBatchTokens: 256, MaxSeqs: 4, Pages: 4096, MaxContext: 1 << 20, EOS: eos, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(eng, tok, format, Options{ModelName: "qwen-test", KeepAlive: -1, MaxContext: 1 << 20, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, srv: srv, eng: eng, eos: eos, tok: tok, done: make(chan struct{})}
	h.http = httptest.NewServer(srv)
	h.url = h.http.URL
	h.client = openai.NewClient(option.WithBaseURL(h.url+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	h.ctx, h.stop = context.WithCancel(context.Background())
	h.startEngine()
	t.Cleanup(func() {
		h.http.CloseClientConnections()
		h.stop()
		<-h.done
		h.http.Close()
	})
	return h
}

// TestQwen35ToolCalls: Qwen3.5 replies through chat completions, streaming
// and not: a tool call in the template's XML form after content (chat
// mode), and in Qwen3's JSON form after reasoning (thinking mode), come
// back as OpenAI tool calls with the arguments typed by the tool's schema,
// reasoning as reasoning_content, and no markup in the streamed deltas.
func TestQwen35ToolCalls(t *testing.T) {
	tools := []chat.Tool{{Type: "function", Function: chat.ToolFunction{Name: "get_weather", Description: "Weather forecast for a city.",
		Parameters: json.RawMessage(`{"type": "object", "properties": {"location": {"type": "string"}, "days": {"type": "integer"}}, "required": ["location"]}`)}}}
	msgs := []chat.Message{{Role: chat.RoleUser, Content: "Weather in Paris for two days?"}}
	for _, tc := range []struct {
		name               string
		thinking           bool
		reply              string
		reasoning, content string
	}{
		{"xml, chat mode", false,
			"Let me check.\n\n<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>",
			"", "Let me check."},
		{"json, thinking mode", true,
			"The user wants a forecast.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\", \"days\": 2}}\n</tool_call>",
			"The user wants a forecast.", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newQwenHarness(t, msgs, tools, tc.thinking, tc.reply)
			params := openai.ChatCompletionNewParams{
				Model:    "qwen-test",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(msgs[0].Content)},
				Tools:    []openai.ChatCompletionToolUnionParam{weatherTool},
			}
			var opts []option.RequestOption
			if tc.thinking {
				opts = append(opts, option.WithJSONSet("reasoning_effort", "high"))
			}
			check := func(mode string, m openai.ChatCompletionMessage, finish, reasoning string) {
				t.Helper()
				if finish != "tool_calls" || m.Content != tc.content || reasoning != tc.reasoning || len(m.ToolCalls) != 1 {
					t.Fatalf("%s: finish %q, content %q, reasoning %q, %d calls", mode, finish, m.Content, reasoning, len(m.ToolCalls))
				}
				c := m.ToolCalls[0]
				if c.Function.Name != "get_weather" || c.Function.Arguments != `{"location": "Paris", "days": 2}` {
					t.Fatalf("%s: call %s(%s)", mode, c.Function.Name, c.Function.Arguments)
				}
			}
			resp, err := h.client.Chat.Completions.New(context.Background(), params, opts...)
			if err != nil {
				t.Fatal(err)
			}
			m := resp.Choices[0].Message
			var reasoning string
			json.Unmarshal([]byte(m.JSON.ExtraFields["reasoning_content"].Raw()), &reasoning)
			check("non-streaming", m, resp.Choices[0].FinishReason, reasoning)

			chunks, acc := streamChat(t, h, params, opts...)
			reasoning = ""
			for _, c := range chunks {
				for _, cc := range c.Choices {
					noQwenMarkup(t, "streamed content", cc.Delta.Content)
					var d string
					json.Unmarshal([]byte(cc.Delta.JSON.ExtraFields["reasoning_content"].Raw()), &d)
					noQwenMarkup(t, "streamed reasoning", d)
					reasoning += d
				}
			}
			check("streaming", acc.Choices[0].Message, acc.Choices[0].FinishReason, reasoning)
		})
	}
}

// noQwenMarkup fails when streamed text shows any part of Qwen3.5's
// markup (the texts of these tests have no "<" of their own).
func noQwenMarkup(t *testing.T, what, text string) {
	t.Helper()
	for _, m := range []string{"<", "think>", "tool_call", "function=", "parameter", "{\"name\""} {
		if strings.Contains(text, m) {
			t.Errorf("%s leaks markup %q: %q", what, m, text)
		}
	}
}
