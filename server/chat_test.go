package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/strata-inference/strata/tokenizer/chat"
)

// streamChat streams a chat completion with openai-go and returns the
// chunks and the accumulated completion.
func streamChat(t *testing.T, h *harness, p openai.ChatCompletionNewParams, opts ...option.RequestOption) ([]openai.ChatCompletionChunk, openai.ChatCompletion) {
	t.Helper()
	s := h.client.Chat.Completions.NewStreaming(context.Background(), p, opts...)
	defer s.Close()
	var chunks []openai.ChatCompletionChunk
	acc := openai.ChatCompletionAccumulator{}
	for s.Next() {
		c := s.Current()
		chunks = append(chunks, c)
		if !acc.AddChunk(c) {
			t.Fatalf("the SDK's accumulator rejected chunk %d: %s", len(chunks), c.RawJSON())
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return chunks, acc.ChatCompletion
}

// TestChatCompletion: openai-go gets a chat completion, non-streaming and
// streaming, from a live server. Both give the same text for the same seed
// (so streaming loses or reorders nothing), the usage counts the rendered
// prompt's tokens and every generated token, and the stream has the
// OpenAI shape: a role chunk first, a finish reason, a usage chunk.
func TestChatCompletion(t *testing.T) {
	h := newHarness(t)
	t.Logf("serving %s (the shipped model: %v)", testModelDir, testModelShipped)
	const maxTokens = 12
	params := openai.ChatCompletionNewParams{
		Model:       "strata-test",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are terse."), openai.UserMessage("In the beginning")},
		MaxTokens:   openai.Int(maxTokens),
		Temperature: openai.Float(0.8),
		Seed:        openai.Int(42),
	}
	ignoreEOS := option.WithJSONSet("ignore_eos", true)
	wantPrompt := h.promptTokens([]chat.Message{{Role: "system", Content: "You are terse."}, {Role: "user", Content: "In the beginning"}}, nil, ChatOptions{})

	resp, err := h.client.Chat.Completions.New(context.Background(), params, ignoreEOS)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.ID, "chatcmpl-") || resp.Model != "strata-test" || resp.Object != "chat.completion" || resp.Created == 0 {
		t.Errorf("response header: id %q model %q object %q created %d", resp.ID, resp.Model, resp.Object, resp.Created)
	}
	if len(resp.Choices) != 1 {
		t.Fatalf("%d choices, want 1", len(resp.Choices))
	}
	c := resp.Choices[0]
	if c.FinishReason != "length" || c.Message.Role != "assistant" || c.Index != 0 {
		t.Errorf("choice: finish %q role %q index %d; want length, assistant, 0", c.FinishReason, c.Message.Role, c.Index)
	}
	u := resp.Usage
	if u.PromptTokens != int64(wantPrompt) || u.CompletionTokens != maxTokens || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("usage %d+%d=%d, want %d+%d", u.PromptTokens, u.CompletionTokens, u.TotalTokens, wantPrompt, maxTokens)
	}

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	chunks, acc := streamChat(t, h, params, ignoreEOS)
	if len(chunks) < 3 {
		t.Fatalf("%d chunks", len(chunks))
	}
	first := chunks[0]
	if len(first.Choices) != 1 || first.Choices[0].Delta.Role != "assistant" {
		t.Errorf("first chunk %s: want the assistant role", first.RawJSON())
	}
	var text strings.Builder
	finishes := 0
	for _, ch := range chunks {
		if ch.ID != chunks[0].ID || ch.Object != "chat.completion.chunk" {
			t.Errorf("chunk id %q object %q", ch.ID, ch.Object)
		}
		for _, cc := range ch.Choices {
			text.WriteString(cc.Delta.Content)
			if cc.FinishReason != "" {
				finishes++
				if cc.FinishReason != "length" {
					t.Errorf("finish reason %q, want length", cc.FinishReason)
				}
			}
		}
	}
	if finishes != 1 {
		t.Errorf("%d finish reasons, want 1", finishes)
	}
	last := chunks[len(chunks)-1]
	if len(last.Choices) != 0 || last.Usage.CompletionTokens != maxTokens || last.Usage.PromptTokens != int64(wantPrompt) {
		t.Errorf("last chunk %s: want the usage (%d+%d) and no choices", last.RawJSON(), wantPrompt, maxTokens)
	}
	if text.String() != c.Message.Content {
		t.Errorf("streamed %q, non-streamed %q (same seed)", text.String(), c.Message.Content)
	}
	if acc.Choices[0].Message.Content != c.Message.Content {
		t.Errorf("the SDK accumulated %q, want %q", acc.Choices[0].Message.Content, c.Message.Content)
	}
	h.waitIdle()
}

// TestChatContentParts: content given as an array of text parts is joined
// with newlines, as if it had been one string (same prompt tokens).
func TestChatContentParts(t *testing.T) {
	h := newHarness(t)
	status, body := h.post("/v1/chat/completions", `{"model":"strata-test","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	var resp chatCompletionJSON
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatal(err)
	}
	if want := h.promptTokens(userMsg("a\nb"), nil, ChatOptions{}); resp.Usage.PromptTokens != want {
		t.Errorf("prompt tokens %d, want %d", resp.Usage.PromptTokens, want)
	}
}

// dsmlReply is a DeepSeek-V4 reply that calls get_weather, in the DSML
// format chat.EncodeDeepSeekV4 teaches the model.
const dsmlReply = "Let me check.\n\n<｜DSML｜tool_calls>\n" +
	"<｜DSML｜invoke name=\"get_weather\">\n" +
	"<｜DSML｜parameter name=\"location\" string=\"true\">Paris</｜DSML｜parameter>\n" +
	"<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n" +
	"</｜DSML｜invoke>\n" +
	"</｜DSML｜tool_calls>"

var weatherTool = openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
	Name:        "get_weather",
	Description: openai.String("Weather forecast for a city."),
	Parameters: shared.FunctionParameters{
		"type": "object",
		"properties": map[string]any{
			"location": map[string]any{"type": "string"},
			"days":     map[string]any{"type": "integer"},
		},
		"required": []string{"location"},
	},
})

// TestChatToolCalls: a reply in DSML reaches openai-go as OpenAI tool
// calls, non-streaming and streaming, with finish_reason "tool_calls" and
// call_ ids. The model is random, so the engine is made to generate
// dsmlReply (engine.Request.Forced): this tests the server's path from
// generated tokens to tool calls (decoding, parsing, the response shapes),
// not the model's ability to call tools.
func TestChatToolCalls(t *testing.T) {
	h := newHarness(t)
	h.force(dsmlReply)
	params := openai.ChatCompletionNewParams{
		Model:     "strata-test",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris for 3 days?")},
		Tools:     []openai.ChatCompletionToolUnionParam{weatherTool},
		MaxTokens: openai.Int(400),
	}
	check := func(mode string, m openai.ChatCompletionMessage, finish string) {
		t.Helper()
		if finish != "tool_calls" {
			t.Errorf("%s: finish reason %q, want tool_calls", mode, finish)
		}
		if m.Content != "Let me check." {
			t.Errorf("%s: content %q, want %q", mode, m.Content, "Let me check.")
		}
		if len(m.ToolCalls) != 1 {
			t.Fatalf("%s: %d tool calls, want 1", mode, len(m.ToolCalls))
		}
		c := m.ToolCalls[0]
		if !strings.HasPrefix(c.ID, "call_") || len(c.ID) < 10 || c.Type != "function" || c.Function.Name != "get_weather" {
			t.Errorf("%s: tool call id %q type %q name %q", mode, c.ID, c.Type, c.Function.Name)
		}
		var args map[string]any
		if err := json.Unmarshal([]byte(c.Function.Arguments), &args); err != nil || args["location"] != "Paris" || args["days"] != 3.0 {
			t.Errorf("%s: arguments %s (%v), want location Paris, days 3", mode, c.Function.Arguments, err)
		}
	}
	resp, err := h.client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	check("non-streaming", resp.Choices[0].Message, resp.Choices[0].FinishReason)
	if resp.Usage.CompletionTokens != int64(len(h.tok.Encode(dsmlReply, true))+1) {
		t.Errorf("completion tokens %d, want the reply's and EOS", resp.Usage.CompletionTokens)
	}

	chunks, acc := streamChat(t, h, params)
	check("streaming", acc.Choices[0].Message, acc.Choices[0].FinishReason)
	for _, c := range chunks {
		for _, cc := range c.Choices {
			if strings.Contains(cc.Delta.Content, "DSML") {
				t.Errorf("streamed content leaks DSML: %q", cc.Delta.Content)
			}
		}
	}
	h.waitIdle()
}

// TestChatReasoning: each accepted way of asking for thinking mode renders
// the thinking prompt and splits the reply at </think> into
// reasoning_content and content, streaming and not (forced reply, as in
// TestChatToolCalls).
func TestChatReasoning(t *testing.T) {
	h := newHarness(t)
	const reply = "Two and two make four.</think>The answer is 4."
	h.force(reply)
	wantPrompt := h.promptTokens(userMsg("2+2?"), nil, ChatOptions{Thinking: true})
	for _, tc := range []struct {
		name string
		opt  option.RequestOption
	}{
		{"reasoning_effort", option.WithJSONSet("reasoning_effort", "high")},
		{"thinking", option.WithJSONSet("thinking", map[string]any{"type": "enabled"})},
		{"chat_template_kwargs", option.WithJSONSet("chat_template_kwargs", map[string]any{"thinking": true})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := openai.ChatCompletionNewParams{Model: "strata-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("2+2?")}}
			resp, err := h.client.Chat.Completions.New(context.Background(), params, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			m := resp.Choices[0].Message
			var reasoning string
			json.Unmarshal([]byte(m.JSON.ExtraFields["reasoning_content"].Raw()), &reasoning)
			if reasoning != "Two and two make four." || m.Content != "The answer is 4." || resp.Choices[0].FinishReason != "stop" {
				t.Errorf("reasoning %q content %q finish %q", reasoning, m.Content, resp.Choices[0].FinishReason)
			}
			if resp.Usage.PromptTokens != int64(wantPrompt) {
				t.Errorf("prompt tokens %d, want %d (thinking prompt)", resp.Usage.PromptTokens, wantPrompt)
			}
			chunks, _ := streamChat(t, h, params, tc.opt)
			var r, c strings.Builder
			for _, ch := range chunks {
				for _, cc := range ch.Choices {
					var d string
					json.Unmarshal([]byte(cc.Delta.JSON.ExtraFields["reasoning_content"].Raw()), &d)
					r.WriteString(d)
					c.WriteString(cc.Delta.Content)
				}
			}
			if r.String() != "Two and two make four." || c.String() != "The answer is 4." {
				t.Errorf("streamed reasoning %q content %q", r.String(), c.String())
			}
		})
	}
}

// TestChatNAndSeed: n choices are n engine requests seeded seed, seed+1,
// ...: choice i of an n=3 request equals a single request with seed+i,
// streaming interleaves the choices under their indices, and the same seed
// gives the same reply.
func TestChatNAndSeed(t *testing.T) {
	h := newHarness(t)
	params := func(n, seed int64) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{
			Model: "strata-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Let there be light")},
			N: openai.Int(n), Seed: openai.Int(seed), MaxTokens: openai.Int(8), Temperature: openai.Float(1),
		}
	}
	ignoreEOS := option.WithJSONSet("ignore_eos", true)
	resp, err := h.client.Chat.Completions.New(context.Background(), params(3, 7), ignoreEOS)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 3 || resp.Usage.CompletionTokens != 24 {
		t.Fatalf("%d choices, %d completion tokens; want 3 and 24", len(resp.Choices), resp.Usage.CompletionTokens)
	}
	for i, c := range resp.Choices {
		if c.Index != int64(i) {
			t.Errorf("choice %d has index %d", i, c.Index)
		}
		one, err := h.client.Chat.Completions.New(context.Background(), params(1, 7+int64(i)), ignoreEOS)
		if err != nil {
			t.Fatal(err)
		}
		if got := one.Choices[0].Message.Content; got != c.Message.Content {
			t.Errorf("choice %d: %q; alone with seed %d: %q", i, c.Message.Content, 7+i, got)
		}
	}
	if resp.Choices[0].Message.Content == resp.Choices[1].Message.Content && resp.Choices[1].Message.Content == resp.Choices[2].Message.Content {
		t.Errorf("three seeds gave the same reply %q", resp.Choices[0].Message.Content)
	}
	chunks, _ := streamChat(t, h, params(3, 7), ignoreEOS)
	texts := make([]strings.Builder, 3)
	for _, ch := range chunks {
		for _, cc := range ch.Choices {
			texts[cc.Index].WriteString(cc.Delta.Content)
		}
	}
	for i := range texts {
		if texts[i].String() != resp.Choices[i].Message.Content {
			t.Errorf("streamed choice %d %q, want %q", i, texts[i].String(), resp.Choices[i].Message.Content)
		}
	}
	h.waitIdle()
}

// TestChatLogprobs: logprobs with top_logprobs give one entry per
// generated token with k alternatives, most likely first; greedy decoding
// picks the first alternative; the bytes of the entries of ordinary (not
// special) tokens make up the content.
func TestChatLogprobs(t *testing.T) {
	h := newHarness(t)
	params := openai.ChatCompletionNewParams{
		Model: "strata-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("And God said")},
		MaxTokens: openai.Int(10), Temperature: openai.Float(0), Logprobs: openai.Bool(true), TopLogprobs: openai.Int(3),
	}
	opts := []option.RequestOption{option.WithJSONSet("ignore_eos", true)}
	resp, err := h.client.Chat.Completions.New(context.Background(), params, opts...)
	if err != nil {
		t.Fatal(err)
	}
	c := resp.Choices[0]
	lps := c.Logprobs.Content
	if len(lps) != 10 {
		t.Fatalf("%d logprob entries, want 10", len(lps))
	}
	var all []byte
	for i, lp := range lps {
		if len(lp.TopLogprobs) != 3 {
			t.Fatalf("entry %d: %d alternatives, want 3", i, len(lp.TopLogprobs))
		}
		if lp.Logprob > 0 || lp.TopLogprobs[0].Logprob < lp.TopLogprobs[1].Logprob || lp.TopLogprobs[1].Logprob < lp.TopLogprobs[2].Logprob {
			t.Errorf("entry %d: logprob %g, alternatives %v", i, lp.Logprob, lp.TopLogprobs)
		}
		if lp.Token != lp.TopLogprobs[0].Token || lp.Logprob != lp.TopLogprobs[0].Logprob {
			t.Errorf("entry %d: greedy token %q (%g) is not the first alternative %q (%g)", i, lp.Token, lp.Logprob, lp.TopLogprobs[0].Token, lp.TopLogprobs[0].Logprob)
		}
		if id, ok := h.tok.TokenID(lp.Token); ok && h.tok.IsSpecial(id) {
			continue // skip_special_tokens (the default) leaves them out of the text
		}
		for _, b := range lp.Bytes {
			all = append(all, byte(b))
		}
	}
	if got := lossyUTF8(all); got != c.Message.Content {
		t.Errorf("the tokens' bytes decode to %q, the content is %q", got, c.Message.Content)
	}
	// Streaming carries the same entries.
	chunks, _ := streamChat(t, h, params, opts...)
	n := 0
	for _, ch := range chunks {
		for _, cc := range ch.Choices {
			for _, lp := range cc.Logprobs.Content {
				if n < len(lps) && (lp.Token != lps[n].Token || lp.Logprob != lps[n].Logprob) {
					t.Errorf("streamed entry %d %q %g, want %q %g", n, lp.Token, lp.Logprob, lps[n].Token, lps[n].Logprob)
				}
				n++
			}
		}
	}
	if n != len(lps) {
		t.Errorf("streamed %d logprob entries, want %d", n, len(lps))
	}
}

// TestStopStrings: generation ends at the first stop string, which is cut
// off with everything after it; no part of it is streamed; finish_reason
// is "stop"; and the engine request is cancelled at once (its pages are
// freed although the reply would go on). The reply is forced.
func TestStopStrings(t *testing.T) {
	h := newHarness(t)
	const reply = "The answer is forty two. Done."
	h.force(reply)
	for _, tc := range []struct {
		stop []string
		want string
	}{
		{[]string{"forty"}, "The answer is "},
		{[]string{"nothing", "two.", "answer is f"}, "The "},
		{[]string{"absent"}, reply},
	} {
		params := openai.ChatCompletionNewParams{
			Model: "strata-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("?")},
			Stop: openai.ChatCompletionNewParamsStopUnion{OfStringArray: tc.stop},
		}
		resp, err := h.client.Chat.Completions.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Choices[0].Message.Content; got != tc.want || resp.Choices[0].FinishReason != "stop" {
			t.Errorf("stop %q: content %q finish %q, want %q stop", tc.stop, got, resp.Choices[0].FinishReason, tc.want)
		}
		chunks, _ := streamChat(t, h, params)
		var text strings.Builder
		for _, ch := range chunks {
			for _, cc := range ch.Choices {
				text.WriteString(cc.Delta.Content)
			}
		}
		if text.String() != tc.want {
			t.Errorf("stop %q: streamed %q, want %q", tc.stop, text.String(), tc.want)
		}
		h.waitIdle()
	}
}

// TestSyntheticModel: the synthetic test model (servertest) serves a
// streaming chat to openai-go and a tool call, whichever model the other
// tests use, so that the fallback stays usable.
func TestSyntheticModel(t *testing.T) {
	h := newHarness(t, func(c *harnessConfig) { c.modelDir = syntheticDir })
	params := openai.ChatCompletionNewParams{
		Model: "strata-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		MaxTokens: openai.Int(6), StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	chunks, acc := streamChat(t, h, params, option.WithJSONSet("ignore_eos", true))
	if acc.Choices[0].FinishReason != "length" || chunks[len(chunks)-1].Usage.CompletionTokens != 6 {
		t.Errorf("finish %q, usage %d", acc.Choices[0].FinishReason, chunks[len(chunks)-1].Usage.CompletionTokens)
	}
	h.force(dsmlReply)
	params.Tools = []openai.ChatCompletionToolUnionParam{weatherTool}
	params.MaxTokens = openai.Int(400)
	_, acc = streamChat(t, h, params)
	if m := acc.Choices[0].Message; len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "get_weather" {
		t.Errorf("tool calls %v", m.ToolCalls)
	}
	h.waitIdle()
}
