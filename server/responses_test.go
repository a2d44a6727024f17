package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/strata-inference/strata/tokenizer/chat"
)

// TestResponses: openai-go gets a response, non-streaming and streaming:
// instructions and input render as a system and a user message, the reply
// is one message item, usage counts the prompt and every generated token,
// the stream's events come in the Responses API's order with the same text
// and end with response.completed; a stored response is returned by GET
// and removed by DELETE, and store false keeps nothing.
func TestResponses(t *testing.T) {
	const reply = "In the beginning was the Word."
	h := newScriptedHarness(t, reply, false)
	ctx := context.Background()
	params := responses.ResponseNewParams{Model: "strata-test", Instructions: openai.String("Answer from the Bible."),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What was in the beginning?")}}
	wantPrompt := h.promptTokens([]chat.Message{{Role: chat.RoleSystem, Content: "Answer from the Bible."}, {Role: chat.RoleUser, Content: "What was in the beginning?"}}, nil, ChatOptions{})
	wantOut := len(h.tok.Encode(reply, true)) + 1

	r, err := h.client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.ID, "resp_") || r.Object != "response" || r.Status != "completed" || r.Model != "strata-test" || r.Instructions.OfString != "Answer from the Bible." {
		t.Errorf("response %s", r.RawJSON())
	}
	if r.OutputText() != reply || len(r.Output) != 1 || r.Output[0].Type != "message" || r.Output[0].Role != "assistant" || r.Output[0].Status != "completed" {
		t.Fatalf("output %s", r.RawJSON())
	}
	if u := r.Usage; u.InputTokens != int64(wantPrompt) || u.OutputTokens != int64(wantOut) || u.TotalTokens != int64(wantPrompt+wantOut) {
		t.Errorf("usage %+v, want %d in, %d out", u, wantPrompt, wantOut)
	}

	final, events := streamResponses(t, h, params)
	var types []string
	var text strings.Builder
	for _, ev := range events {
		types = append(types, ev.Type)
		if ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
		}
	}
	order := strings.Join(types, " ")
	if !strings.HasPrefix(order, "response.created response.in_progress response.output_item.added response.content_part.added response.output_text.delta") ||
		!strings.HasSuffix(order, "response.output_text.done response.content_part.done response.output_item.done response.completed") {
		t.Errorf("event order %s", order)
	}
	if text.String() != reply || final.OutputText() != reply || final.Usage.OutputTokens != int64(wantOut) {
		t.Errorf("streamed %q, final %q (%d tokens)", text.String(), final.OutputText(), final.Usage.OutputTokens)
	}

	got, err := h.client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	if err != nil || got.ID != r.ID || got.OutputText() != reply {
		t.Fatalf("GET: %v, %v", got, err)
	}
	if err := h.client.Responses.Delete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	_, err = h.client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 404 {
		t.Errorf("GET after DELETE: %v", err)
	}
	params.Store = openai.Bool(false)
	unstored, err := h.client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.Responses.Get(ctx, unstored.ID, responses.ResponseGetParams{}); !errors.As(err, &oe) || oe.StatusCode != 404 {
		t.Errorf("a response made with store false was stored: %v", err)
	}

	short := params
	short.MaxOutputTokens = openai.Int(3)
	inc, err := h.client.Responses.New(ctx, short)
	if err != nil || inc.Status != "incomplete" || inc.IncompleteDetails.Reason != "max_output_tokens" || inc.Usage.OutputTokens != 3 {
		t.Errorf("max_output_tokens 3: %v %v", inc, err)
	}
	final, _ = streamResponses(t, h, short)
	if final.Status != "incomplete" || final.IncompleteDetails.Reason != "max_output_tokens" {
		t.Errorf("streamed max_output_tokens 3: %s", final.RawJSON())
	}
	h.waitIdle()
}

// TestResponsesReasoning: reasoning.effort turns thinking mode on (none
// leaves it off); the reasoning is a reasoning item before the message,
// streamed as reasoning_text (or, with reasoning.summary, as the summary,
// which strata makes of the reasoning itself); with include
// reasoning.encrypted_content a client that stores nothing sends the item
// back and the reasoning renders into the next prompt.
func TestResponsesReasoning(t *testing.T) {
	h := newScriptedHarness(t, "Two and two make four.</think>It is 4.", true)
	ctx := context.Background()
	params := responses.ResponseNewParams{Model: "strata-test", Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortMedium},
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("2+2?")}}
	r, err := h.client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Output) != 2 || r.Output[0].Type != "reasoning" || r.Output[0].Content[0].Text != "Two and two make four." || r.OutputText() != "It is 4." {
		t.Fatalf("output %s", r.RawJSON())
	}
	if want := h.promptTokens(userMsg("2+2?"), nil, ChatOptions{Thinking: true, ReasoningEffort: "high"}); r.Usage.InputTokens != int64(want) {
		t.Errorf("prompt %d tokens, want %d (thinking mode)", r.Usage.InputTokens, want)
	}
	if rt := r.Usage.OutputTokensDetails.ReasoningTokens; rt < 2 || rt >= r.Usage.OutputTokens {
		t.Errorf("%d reasoning tokens of %d", rt, r.Usage.OutputTokens)
	}
	for _, summary := range []shared.ReasoningSummary{"", shared.ReasoningSummaryDetailed} {
		p := params
		p.Reasoning.Summary = summary
		final, events := streamResponses(t, h, p)
		var reasoning strings.Builder
		want := "response.reasoning_text.delta"
		if summary != "" {
			want = "response.reasoning_summary_text.delta"
		}
		for _, ev := range events {
			if ev.Type == want {
				reasoning.WriteString(ev.Delta)
			}
		}
		if reasoning.String() != "Two and two make four." || final.OutputText() != "It is 4." {
			t.Errorf("summary %q: streamed %q as %s, final %s", summary, reasoning.String(), want, final.RawJSON())
		}
		if summary != "" && (len(final.Output[0].Summary) != 1 || final.Output[0].Summary[0].Text != "Two and two make four.") {
			t.Errorf("summary %q: the reasoning item's summary is %s", summary, final.Output[0].RawJSON())
		}
	}

	// effort none: chat mode.
	none := params
	none.Reasoning.Effort = shared.ReasoningEffortNone
	nr, err := h.client.Responses.New(ctx, none)
	if err != nil {
		t.Fatal(err)
	}
	if want := h.promptTokens(userMsg("2+2?"), nil, ChatOptions{}); nr.Usage.InputTokens != int64(want) {
		t.Errorf("effort none: prompt %d tokens, want %d (chat mode)", nr.Usage.InputTokens, want)
	}

	// Stateless: the reasoning comes back as encrypted content.
	enc := params
	enc.Store = openai.Bool(false)
	enc.Include = []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent}
	er, err := h.client.Responses.New(ctx, enc)
	if err != nil {
		t.Fatal(err)
	}
	if er.Output[0].EncryptedContent == "" {
		t.Fatalf("no encrypted content: %s", er.RawJSON())
	}
	// The client sends the output items back, the reasoning without its
	// text, as clients that keep only the encrypted content do.
	items := []any{map[string]string{"role": "user", "content": "2+2?"}}
	for _, it := range er.Output {
		var m map[string]any
		json.Unmarshal([]byte(it.RawJSON()), &m)
		if m["type"] == "reasoning" {
			delete(m, "content")
		}
		items = append(items, m)
	}
	items = append(items, map[string]string{"role": "user", "content": "And 3+3?"})
	next := enc
	next.Input = responses.ResponseNewParamsInputUnion{}
	next.Tools = responsesTools() // with tools DeepSeek-V4 keeps earlier reasoning
	nx, err := h.client.Responses.New(ctx, next, option.WithJSONSet("input", items))
	if err != nil {
		t.Fatal(err)
	}
	tools := []chat.Tool{
		{Type: "function", Function: chat.ToolFunction{Name: "get_weather", Parameters: json.RawMessage(`{"properties":{"location":{"type":"string"}},"type":"object"}`)}},
		{Type: "function", Function: chat.ToolFunction{Name: "get_time", Parameters: json.RawMessage(`{"properties":{"zone":{"type":"string"}},"type":"object"}`)}},
	}
	conv := []chat.Message{{Role: chat.RoleUser, Content: "2+2?"}, {Role: chat.RoleAssistant, ReasoningContent: "Two and two make four.", Content: "It is 4."}, {Role: chat.RoleUser, Content: "And 3+3?"}}
	if want := h.promptTokens(conv, tools, ChatOptions{Thinking: true, ReasoningEffort: "high"}); nx.Usage.InputTokens != int64(want) {
		t.Errorf("with the encrypted reasoning sent back: prompt %d tokens, want %d", nx.Usage.InputTokens, want)
	}
	h.waitIdle()
}

// TestResponsesContinuationHitsPrefixCache: a response continued with
// previous_response_id starts its prompt with the stored response's own
// token ids (prompt and output, as generated), so the engine restores the
// conversation from the snapshot the first response left at its last
// aligned position: usage.input_tokens_details.cached_tokens is exactly
// that position, the engine's counter and the metric move by as much, and
// it beats replaying the conversation as input items (re-tokenized text).
func TestResponsesContinuationHitsPrefixCache(t *testing.T) {
	for _, thinking := range []bool{false, true} {
		t.Run(map[bool]string{false: "chat mode", true: "thinking mode"}[thinking], func(t *testing.T) {
			h := newHarness(t)
			ctx := context.Background()
			align := h.model.PrefixAlign()
			var reasoning shared.ReasoningParam
			if thinking {
				reasoning.Effort = shared.ReasoningEffortHigh
			}
			const q1, q2 = "And God said, Let there be light: and there was light.", "And God saw the light."
			first, err := h.client.Responses.New(ctx, responses.ResponseNewParams{Model: "strata-test", MaxOutputTokens: openai.Int(int64(2*align + 20)),
				Reasoning: reasoning, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(q1)}},
				option.WithJSONSet("ignore_eos", true), option.WithJSONSet("temperature", 0))
			if err != nil {
				t.Fatal(err)
			}
			ran := int(first.Usage.InputTokens + first.Usage.OutputTokens)
			if ran < 2*align {
				t.Fatalf("the first response ran %d tokens; the test needs two aligned blocks (%d)", ran, 2*align)
			}
			// The engine fed every token but the last generated one.
			wantHit := (ran - 1) / align * align
			hitsBefore, metricBefore := h.eng.Stats().PrefixHitTokens, cachedMetric(t, h)

			next, err := h.client.Responses.New(ctx, responses.ResponseNewParams{Model: "strata-test", MaxOutputTokens: openai.Int(4),
				Reasoning: reasoning, PreviousResponseID: openai.String(first.ID),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(q2)}})
			if err != nil {
				t.Fatal(err)
			}
			cached := int(next.Usage.InputTokensDetails.CachedTokens)
			if cached != wantHit {
				t.Errorf("the continuation hit %d tokens, want %d (the first response's last aligned position)", cached, wantHit)
			}
			if d := int(h.eng.Stats().PrefixHitTokens - hitsBefore); d != cached {
				t.Errorf("usage says %d cached tokens, the engine hit %d", cached, d)
			}
			if d := cachedMetric(t, h) - metricBefore; d != float64(cached) {
				t.Errorf("strata_prompt_cached_tokens_total moved by %g, usage says %d", d, cached)
			}

			// The same conversation replayed as items, rendered and
			// tokenized afresh (in thinking mode without tools DeepSeek-V4
			// drops the earlier reasoning, so the replay shares only the
			// first prompt with what the engine ran).
			items := []any{map[string]string{"role": "user", "content": q1}}
			for _, it := range first.Output {
				items = append(items, json.RawMessage(it.RawJSON()))
			}
			items = append(items, map[string]string{"role": "user", "content": q2})
			replay, err := h.client.Responses.New(ctx, responses.ResponseNewParams{Model: "strata-test", MaxOutputTokens: openai.Int(4), Reasoning: reasoning},
				option.WithJSONSet("input", items))
			if err != nil {
				t.Fatal(err)
			}
			rc := int(replay.Usage.InputTokensDetails.CachedTokens)
			t.Logf("continuation: %d of %d prompt tokens cached; replayed items: %d of %d", cached, next.Usage.InputTokens, rc, replay.Usage.InputTokens)
			if rc > cached || (thinking && rc >= cached) {
				t.Errorf("replaying the items hit %d tokens, continuing %d", rc, cached)
			}
			h.waitIdle()
		})
	}
}

// cachedMetric reads strata_prompt_cached_tokens_total.
func cachedMetric(t *testing.T, h *harness) float64 {
	t.Helper()
	resp, err := http.Get(h.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "strata_prompt_cached_tokens_total "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	t.Fatal("no strata_prompt_cached_tokens_total in /metrics")
	return 0
}

// TestResponsesErrors: what the Responses API cannot honour is a 400 that
// names the field, and an unknown previous_response_id a 404.
func TestResponsesErrors(t *testing.T) {
	h := newHarness(t)
	req := func(extra string) string { return `{"model":"strata-test","input":"hi"` + extra + `}` }
	for _, tc := range []struct {
		name, body  string
		status      int
		param, code string
	}{
		{"unknown previous response", req(`,"previous_response_id":"resp_nope"`), 404, "previous_response_id", "previous_response_not_found"},
		{"web search tool", req(`,"tools":[{"type":"web_search"}]`), 400, "tools[0].type", "unsupported_value"},
		{"strict tool with an unsupported keyword", req(`,"tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"a":{"not":{}}}}}]`), 400, "tools", "unsupported_value"},
		{"unsupported keyword in text.format", req(`,"text":{"format":{"type":"json_schema","name":"x","schema":{"type":"string","pattern":"\\bx"}}}`), 400, "text.format.schema", "unsupported_value"},
		{"text.format without a name", req(`,"text":{"format":{"type":"json_schema","schema":{"type":"object"}}}`), 400, "text.format.name", "invalid_value"},
		{"text.format without a schema", req(`,"text":{"format":{"type":"json_schema","name":"x"}}`), 400, "text.format.schema", "missing_required_parameter"},
		{"text.format with an unknown field", req(`,"text":{"format":{"type":"json_object","schema":{}}}`), 400, "text.format.schema", "unsupported_parameter"},
		{"tool_choice required without tools", req(`,"tool_choice":"required"`), 400, "tool_choice", "invalid_value"},
		{"tool_choice names a missing function", req(`,"tools":[{"type":"function","name":"f","strict":false}],"tool_choice":{"type":"function","name":"g"}`), 400, "tool_choice.name", "invalid_value"},
		{"tool_choice allowed_tools", req(`,"tools":[{"type":"function","name":"f","strict":false}],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[]}`), 400, "tool_choice.type", "unsupported_value"},
		{"image input", `{"model":"strata-test","input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`, 400, "input[0].content[0].type", "unsupported_value"},
		{"item reference", `{"model":"strata-test","input":[{"type":"item_reference","id":"x"}]}`, 400, "input[0].type", "unsupported_value"},
		{"unknown field", req(`,"frobnicate":1`), 400, "frobnicate", "unsupported_parameter"},
		{"background", req(`,"background":true`), 400, "background", "unsupported_value"},
		{"truncation auto", req(`,"truncation":"auto"`), 400, "truncation", "unsupported_value"},
		{"bad effort", req(`,"reasoning":{"effort":"extreme"}`), 400, "reasoning.effort", "invalid_value"},
		{"no input", `{"model":"strata-test"}`, 400, "input", "missing_required_parameter"},
		{"unknown response", "GET", 404, "", "response_not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var status int
			var data []byte
			if tc.body == "GET" {
				resp, err := http.Get(h.url + "/v1/responses/resp_nope")
				if err != nil {
					t.Fatal(err)
				}
				data, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
				status = resp.StatusCode
			} else {
				status, data = h.post("/v1/responses", tc.body)
			}
			var e errorBody
			if status != tc.status || json.Unmarshal(data, &e) != nil || e.Error.Code == nil || *e.Error.Code != tc.code {
				t.Fatalf("status %d body %s; want %d, code %s", status, data, tc.status, tc.code)
			}
			if p := deref(e.Error.Param); tc.param != "" && p != tc.param {
				t.Errorf("param %v, want %q", p, tc.param)
			}
		})
	}
	if st := h.eng.Stats(); st.Steps != 0 {
		t.Errorf("bad requests reached the engine: %+v", st)
	}
}
