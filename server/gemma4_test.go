package server

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/model/gemma4"
	"github.com/strata-inference/strata/server/servertest"
	"github.com/strata-inference/strata/tokenizer"
	"github.com/strata-inference/strata/tokenizer/chat"
)

// gemma4Harness serves the synthetic Gemma 4 folder (its tokenizer, its
// chat template through Gemma4, generation_config.json's <turn|> as an end
// token), with the model the folder holds or the one given.
func gemma4Harness(t *testing.T, mk func(dir string, tok *tokenizer.Tokenizer) model.Model) (*harness, ChatFormat) {
	t.Helper()
	dir := t.TempDir()
	if err := servertest.WriteGemma4Synthetic(dir, 1); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.LoadTemplate(dir)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Gemma4(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	m := mk(dir, tok)
	h := newHarness(t, func(c *harnessConfig) {
		c.modelDir, c.model, c.eos, c.format = dir, m, 1, f
		c.opt.EndTokens = []int32{servertest.Gemma4TurnEnd}
		c.opt.MaxContext = 4096
		c.pages = 0
	})
	return h, f
}

type chatReply struct {
	Choices []struct {
		FinishReason string `json:"finish_reason"`
		Message      struct {
			Content          *string `json:"content"`
			ReasoningContent string  `json:"reasoning_content"`
			ToolCalls        []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

var gemmaTools = []map[string]any{{"type": "function", "function": map[string]any{
	"name": "get_weather", "description": "The weather of a city",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}}, "required": []string{"city"}},
}}}

// TestGemma4ChatEndToEnd: a chat with tools through the whole serving path
// on a (random-weight) Gemma 4: the prompt is Gemma's template, markup
// tokenized as special tokens; the model's reply comes back as a chat
// completion, streamed and not, the same.
func TestGemma4ChatEndToEnd(t *testing.T) {
	h, f := gemma4Harness(t, func(dir string, _ *tokenizer.Tokenizer) model.Model {
		m, err := gemma4.Load(dir, cpu.New(0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	})
	msgs := []map[string]any{{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is the weather in Paris?"}}
	req := map[string]any{"model": "strata-test", "messages": msgs, "tools": gemmaTools, "max_tokens": 12, "temperature": 0}
	status, body := h.post("/v1/chat/completions", req)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	var r chatReply
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	text, err := f.Render([]chat.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "What is the weather in Paris?"}},
		[]chat.Tool{{Type: "function", Function: chat.ToolFunction{Name: "get_weather", Description: "The weather of a city",
			Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}`)}}}, ChatOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(text, "<bos><|turn>system\nBe brief.<|tool>declaration:get_weather{") || !strings.HasSuffix(text, "<|turn>model\n<|channel>thought\n<channel|>") {
		t.Fatalf("prompt %q", text)
	}
	ids := h.tok.Encode(text, true)
	if ids[0] != 2 || ids[1] != 3 || r.Usage.PromptTokens != len(ids) {
		t.Fatalf("prompt of %d tokens (starting %v), the server counted %d", len(ids), ids[:2], r.Usage.PromptTokens)
	}
	if len(r.Choices) != 1 || r.Usage.CompletionTokens == 0 || !slices.Contains([]string{"stop", "length", "tool_calls"}, r.Choices[0].FinishReason) {
		t.Fatalf("reply %s", body)
	}
	t.Logf("reply: %s", body)
	// The same request streamed gives the same text.
	req["stream"] = true
	status, body = h.post("/v1/chat/completions", req)
	if status != 200 || !bytes.Contains(body, []byte("data: [DONE]")) {
		t.Fatalf("stream: status %d: %s", status, body)
	}
	var content strings.Builder
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		for _, c := range ev.Choices {
			content.WriteString(c.Delta.Content)
		}
	}
	want := ""
	if c := r.Choices[0].Message.Content; c != nil {
		want = *c
	}
	if content.String() != want {
		t.Fatalf("streamed content %q, not streamed %q", content.String(), want)
	}
}

// TestGemma4ToolCallsEndToEnd: a model that calls a tool in Gemma's
// notation and, given the result, answers: the call comes back as an
// OpenAI tool call (the reply stops at <|tool_response>, where Gemma waits
// for the result), the result goes back into the prompt the template's
// way, and the answer ends at <turn|>; with thinking on, the thought channel
// comes back as reasoning.
func TestGemma4ToolCallsEndToEnd(t *testing.T) {
	var tok *tokenizer.Tokenizer
	h, _ := gemma4Harness(t, func(_ string, tk *tokenizer.Tokenizer) model.Model {
		tok = tk
		call := tk.Encode(`<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:2}<tool_call|><|tool_response>`, true)
		answer := tk.Encode("<|channel>thought\nThe tool said so.<channel|>It is sunny in Paris.<turn|>", true)
		afterPrompt := tk.Encode("<|turn>model\n", true)
		afterResult := tk.Encode("<tool_response|>", true)
		return &scriptedModel{vocab: tk.VocabSize(), script: func(hist []int32) int32 {
			if slices.Contains(hist, afterResult[0]) {
				return replyScript(afterResult, answer, 1)(hist)
			}
			return replyScript(afterPrompt, call, 1)(hist)
		}}
	})
	user := map[string]any{"role": "user", "content": "What is the weather in Paris?"}
	status, body := h.post("/v1/chat/completions", map[string]any{"model": "strata-test", "messages": []any{user}, "tools": gemmaTools,
		"chat_template_kwargs": map[string]any{"enable_thinking": true}})
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	var r chatReply
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	c := r.Choices[0]
	if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 || c.Message.ToolCalls[0].Function.Name != "get_weather" ||
		c.Message.ToolCalls[0].Function.Arguments != `{"city":"Paris","days":2}` {
		t.Fatalf("first reply %s", body)
	}
	if c.Message.Content != nil && *c.Message.Content != "" {
		t.Fatalf("first reply has content %q", *c.Message.Content)
	}
	id := c.Message.ToolCalls[0].ID
	msgs := []any{user,
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function",
			"function": map[string]any{"name": "get_weather", "arguments": `{"city":"Paris","days":2}`}}}},
		map[string]any{"role": "tool", "tool_call_id": id, "content": "sunny"}}
	status, body = h.post("/v1/chat/completions", map[string]any{"model": "strata-test", "messages": msgs, "tools": gemmaTools,
		"chat_template_kwargs": map[string]any{"enable_thinking": true}})
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	r = chatReply{}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	c = r.Choices[0]
	if c.FinishReason != "stop" || c.Message.Content == nil || *c.Message.Content != "It is sunny in Paris." || c.Message.ReasoningContent != "The tool said so." || len(c.Message.ToolCalls) != 0 {
		t.Fatalf("second reply %s", body)
	}
	// The answer stopped at <turn|>: the reply's tokens are the answer's.
	if n := len(tok.Encode("<|channel>thought\nThe tool said so.<channel|>It is sunny in Paris.<turn|>", true)); r.Usage.CompletionTokens != n {
		t.Fatalf("%d completion tokens, the answer has %d", r.Usage.CompletionTokens, n)
	}
}
