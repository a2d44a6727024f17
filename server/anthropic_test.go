package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/strata-inference/strata/tokenizer/chat"
)

// TestMessages: the Anthropic SDK gets a message, non-streaming and
// streaming, from a live server: the reply as one text block, stop_reason
// end_turn, usage with the rendered prompt's tokens (system prompt given as
// a string or as blocks alike) and every generated token; the stream's
// events come in Anthropic's order and the SDK's accumulator rebuilds the
// same message; stop_sequences and max_tokens end it with their reasons.
func TestMessages(t *testing.T) {
	const reply = "Hello there. STOP here, please."
	h := newScriptedHarness(t, reply, false)
	ac := h.anthropic()
	ctx := context.Background()
	params := anthropic.MessageNewParams{Model: "strata-test", MaxTokens: 100,
		System:   []anthropic.TextBlockParam{{Text: "You are terse."}, {Text: "Be kind."}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hi!"))}}
	wantPrompt := h.promptTokens([]chat.Message{{Role: chat.RoleSystem, Content: "You are terse.\nBe kind."}, {Role: chat.RoleUser, Content: "Hi!"}}, nil, ChatOptions{})
	wantOut := len(h.tok.Encode(reply, true)) + 1

	m, err := ac.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.ID, "msg_") || m.Type != "message" || m.Role != "assistant" || m.Model != "strata-test" {
		t.Errorf("id %q type %q role %q model %q", m.ID, m.Type, m.Role, m.Model)
	}
	if len(m.Content) != 1 || m.Content[0].Type != "text" || m.Content[0].Text != reply || m.StopReason != "end_turn" {
		t.Fatalf("content %s, stop %q", m.RawJSON(), m.StopReason)
	}
	if u := m.Usage; u.InputTokens+u.CacheReadInputTokens != int64(wantPrompt) || u.OutputTokens != int64(wantOut) {
		t.Errorf("usage %d+%d in, %d out; want %d in, %d out", u.InputTokens, u.CacheReadInputTokens, u.OutputTokens, wantPrompt, wantOut)
	}

	var types []string
	acc := streamAnthropic(t, ac, params, func(ev anthropic.MessageStreamEventUnion) { types = append(types, ev.Type) })
	if len(acc.Content) != 1 || acc.Content[0].Text != reply || acc.StopReason != "end_turn" || acc.Usage.OutputTokens != int64(wantOut) ||
		acc.Usage.InputTokens+acc.Usage.CacheReadInputTokens != int64(wantPrompt) {
		t.Errorf("streamed: %s", acc.RawJSON())
	}
	order := strings.Join(types, " ")
	if !strings.HasPrefix(order, "message_start content_block_start content_block_delta") ||
		!strings.HasSuffix(order, "content_block_delta content_block_stop message_delta message_stop") {
		t.Errorf("event order %s", order)
	}

	// The same system prompt as a string renders the same prompt.
	count, err := ac.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "strata-test", Messages: params.Messages,
		System: anthropic.MessageCountTokensParamsSystemUnion{OfString: anthropic.String("You are terse.\nBe kind.")}})
	if err != nil || count.InputTokens != int64(wantPrompt) {
		t.Errorf("count_tokens %v (%v), want %d", count, err, wantPrompt)
	}

	stop := params
	stop.StopSequences = []string{"STOP", "never"}
	for _, stream := range []bool{false, true} {
		var got *anthropic.Message
		if stream {
			got = streamAnthropic(t, ac, stop, nil)
		} else if got, err = ac.Messages.New(ctx, stop); err != nil {
			t.Fatal(err)
		}
		if got.StopReason != "stop_sequence" || got.StopSequence != "STOP" || got.Content[0].Text != "Hello there. " {
			t.Errorf("stream %v: stop_sequences: %s", stream, got.RawJSON())
		}
	}
	short := params
	short.MaxTokens = 3
	if got, err := ac.Messages.New(ctx, short); err != nil || got.StopReason != "max_tokens" || got.Usage.OutputTokens != 3 {
		t.Errorf("max_tokens 3: %v, %v", got, err)
	}
	h.waitIdle()
}

// TestMessagesThinking: with thinking enabled the reply's reasoning is a
// thinking block (with a signature) before the text, streamed as
// thinking_delta events and a signature_delta; display "omitted" leaves
// the text out and keeps the signature, which brings the reasoning back
// when the block is sent in a later request.
func TestMessagesThinking(t *testing.T) {
	h := newScriptedHarness(t, "Two and two make four.</think>It is 4.", true)
	ac := h.anthropic()
	ctx := context.Background()
	params := anthropic.MessageNewParams{Model: "strata-test", MaxTokens: 2000,
		Thinking: anthropic.ThinkingConfigParamUnion{OfEnabled: &anthropic.ThinkingConfigEnabledParam{BudgetTokens: 1024}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("2+2?"))}}
	check := func(mode string, m *anthropic.Message, thinking string) {
		t.Helper()
		if len(m.Content) != 2 || m.Content[0].Type != "thinking" || m.Content[0].Thinking != thinking || m.Content[0].Signature == "" ||
			m.Content[1].Text != "It is 4." || m.StopReason != "end_turn" {
			t.Fatalf("%s: %s", mode, m.RawJSON())
		}
	}
	m, err := ac.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	check("non-streaming", m, "Two and two make four.")
	var sawSignature bool
	acc := streamAnthropic(t, ac, params, func(ev anthropic.MessageStreamEventUnion) {
		sawSignature = sawSignature || ev.Delta.Type == "signature_delta"
	})
	check("streaming", acc, "Two and two make four.")
	if !sawSignature || acc.Content[0].Signature != m.Content[0].Signature {
		t.Errorf("signature delta %v, signature %q vs %q", sawSignature, acc.Content[0].Signature, m.Content[0].Signature)
	}

	omitted := params
	omitted.Thinking.OfEnabled.Display = anthropic.ThinkingConfigEnabledDisplayOmitted
	o, err := ac.Messages.New(ctx, omitted)
	if err != nil {
		t.Fatal(err)
	}
	check("omitted", o, "")
	check("omitted, streaming", streamAnthropic(t, ac, omitted, nil), "")

	// Sent back (with tools, so DeepSeek-V4 keeps earlier reasoning), the
	// omitted block renders as the reasoning it stands for.
	conv := append(slices.Clone(params.Messages), o.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("And 3+3?")))
	count, err := ac.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "strata-test", Messages: conv, Tools: countTools(anthropicTools()),
		Thinking: anthropic.ThinkingConfigParamUnion{OfEnabled: &anthropic.ThinkingConfigEnabledParam{BudgetTokens: 1024}}})
	if err != nil {
		t.Fatal(err)
	}
	want := h.promptTokens([]chat.Message{{Role: chat.RoleUser, Content: "2+2?"},
		{Role: chat.RoleAssistant, ReasoningContent: "Two and two make four.", Content: "It is 4."},
		{Role: chat.RoleUser, Content: "And 3+3?"}}, chatTools(anthropicTools()), ChatOptions{Thinking: true})
	if count.InputTokens != int64(want) {
		t.Errorf("the conversation with the omitted thinking block counts %d tokens, want %d", count.InputTokens, want)
	}
	h.waitIdle()
}

// TestMessagesErrors: the Messages API answers errors in Anthropic's shape
// {"type":"error","error":{"type","message"}} with the right status and
// error type, and the SDK reads them as *anthropic.Error.
func TestMessagesErrors(t *testing.T) {
	h := newHarness(t, func(c *harnessConfig) { c.opt.MaxContext = 200 })
	msg := func(extra string) string {
		return `{"model":"strata-test","max_tokens":10,"messages":[{"role":"user","content":"hi"}]` + extra + `}`
	}
	for _, tc := range []struct {
		name, path, body string
		status           int
		typ, mention     string
	}{
		{"malformed JSON", "/v1/messages", `{"model":`, 400, "invalid_request_error", "JSON"},
		{"no max_tokens", "/v1/messages", `{"model":"strata-test","messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "max_tokens"},
		{"unknown field", "/v1/messages", msg(`,"frobnicate":true`), 400, "invalid_request_error", "frobnicate"},
		{"unknown block field", "/v1/messages", `{"model":"strata-test","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"a","x":1}]}]}`, 400, "invalid_request_error", "x"},
		{"image block", "/v1/messages", `{"model":"strata-test","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`, 400, "invalid_request_error", "image"},
		{"first message not the user's", "/v1/messages", `{"model":"strata-test","max_tokens":5,"messages":[{"role":"assistant","content":"a"}]}`, 400, "invalid_request_error", "first message"},
		{"temperature above 1", "/v1/messages", msg(`,"temperature":1.5`), 400, "invalid_request_error", "temperature"},
		{"server tool", "/v1/messages", msg(`,"tools":[{"type":"web_search_20250305","name":"web_search"}]`), 400, "invalid_request_error", "server tool"},
		{"tool_choice any without tools", "/v1/messages", msg(`,"tool_choice":{"type":"any"}`), 400, "invalid_request_error", "at least one tool"},
		{"tool_choice names a missing tool", "/v1/messages", msg(`,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"g"}`), 400, "invalid_request_error", "not in tools"},
		{"strict tool with an unsupported keyword", "/v1/messages", msg(`,"tools":[{"name":"lookup","input_schema":{"type":"object","properties":{"q":{"type":"array","uniqueItems":true}}},"strict":true}]`), 400, "invalid_request_error", "uniqueItems"},
		{"forced tool with an unsupported keyword", "/v1/messages", msg(`,"tools":[{"name":"lookup","input_schema":{"type":"object","properties":{"q":{"not":{}}}}}],"tool_choice":{"type":"any"}`), 400, "invalid_request_error", "\"not\""},
		{"unsupported keyword in the output format", "/v1/messages", msg(`,"output_config":{"format":{"type":"json_schema","schema":{"type":"string","pattern":"\\bx"}}}`), 400, "invalid_request_error", "pattern"},
		{"output format of another type", "/v1/messages", msg(`,"output_config":{"format":{"type":"json_object"}}`), 400, "invalid_request_error", "output_config.format.type"},
		{"output format with a prefill", "/v1/messages", `{"model":"strata-test","max_tokens":10,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"{"}],"output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}}}`, 400, "invalid_request_error", "prefilled"},
		{"thinking budget too small", "/v1/messages", msg(`,"thinking":{"type":"enabled","budget_tokens":10}`), 400, "invalid_request_error", "budget_tokens"},
		{"prompt too long", "/v1/messages", `{"model":"strata-test","max_tokens":5,"messages":[{"role":"user","content":"` + strings.Repeat("word ", 300) + `"}]}`, 400, "invalid_request_error", "context length"},
		{"unknown model", "/v1/messages", `{"model":"claude-9","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, 404, "not_found_error", "claude-9"},
		{"count_tokens with max_tokens", "/v1/messages/count_tokens", msg(""), 400, "invalid_request_error", "max_tokens"},
		{"wrong method", "/v1/messages", "", 405, "invalid_request_error", "GET"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := "POST"
			if tc.status == 405 {
				method = "GET"
			}
			req, _ := http.NewRequest(method, h.url+tc.path, strings.NewReader(tc.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			var e anthropicErrorJSON
			if resp.StatusCode != tc.status || json.Unmarshal(data, &e) != nil || e.Type != "error" || e.Error.Type != tc.typ {
				t.Fatalf("status %d body %s; want %d with an error of type %s", resp.StatusCode, data, tc.status, tc.typ)
			}
			if !strings.Contains(strings.ToLower(e.Error.Message), strings.ToLower(tc.mention)) {
				t.Errorf("message %q does not mention %q", e.Error.Message, tc.mention)
			}
		})
	}
	ac := h.anthropic()
	_, err := ac.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "claude-9", MaxTokens: 5,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 404 || !strings.Contains(ae.RawJSON(), "not_found_error") {
		t.Errorf("SDK error %v", err)
	}
	if st := h.eng.Stats(); st.Steps != 0 {
		t.Errorf("bad requests reached the engine: %+v", st)
	}
}

// TestMessagesPrefill: a last assistant message is continued: the prompt
// ends inside the assistant's turn, and the response holds what follows
// the prefilled text (the scripted model's reply, from where the prefill
// leaves it).
func TestMessagesPrefill(t *testing.T) {
	const prefill = "The answer is"
	h := newScriptedHarness(t, prefill+" four.", false)
	params := anthropic.MessageNewParams{Model: "strata-test", MaxTokens: 20,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("q")), anthropic.NewAssistantMessage(anthropic.NewTextBlock(prefill))}}
	ac := h.anthropic()
	m, err := ac.Messages.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	want := h.promptTokens([]chat.Message{{Role: chat.RoleUser, Content: "q"}, {Role: chat.RoleAssistant, Content: prefill, WithoutEOS: true}}, nil, ChatOptions{})
	if m.Usage.InputTokens != int64(want) || m.Content[0].Text != " four." || m.StopReason != "end_turn" {
		t.Errorf("prefilled: %d prompt tokens (want %d), reply %s", m.Usage.InputTokens, want, m.RawJSON())
	}
}

// TestMessagesCachedTokens: a second request with the same long prompt is
// served from the prefix cache; its usage reports the hit as
// cache_read_input_tokens (with input_tokens the rest), as the engine
// counted it, streaming and not.
func TestMessagesCachedTokens(t *testing.T) {
	h := newHarness(t)
	ac := h.anthropic()
	params := anthropic.MessageNewParams{Model: "strata-test", MaxTokens: 4,
		System:   []anthropic.TextBlockParam{{Text: strings.Repeat("In the beginning God created the heaven and the earth. ", 30)}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("And the earth was without form."))}}
	first, err := ac.Messages.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if first.Usage.CacheReadInputTokens != 0 {
		t.Fatalf("the first request hit %d tokens", first.Usage.CacheReadInputTokens)
	}
	prompt := first.Usage.InputTokens
	for _, stream := range []bool{false, true} {
		before := h.eng.Stats().PrefixHitTokens
		var m *anthropic.Message
		if stream {
			m = streamAnthropic(t, ac, params, nil)
		} else if m, err = ac.Messages.New(context.Background(), params); err != nil {
			t.Fatal(err)
		}
		hit := h.eng.Stats().PrefixHitTokens - before
		if hit == 0 || m.Usage.CacheReadInputTokens != hit || m.Usage.InputTokens+m.Usage.CacheReadInputTokens != prompt {
			t.Errorf("stream %v: usage %d in + %d cached, the engine hit %d of %d", stream, m.Usage.InputTokens, m.Usage.CacheReadInputTokens, hit, prompt)
		}
	}
	h.waitIdle()
}
