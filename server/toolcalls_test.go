package server

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/strata-inference/strata/tokenizer/chat"
)

// DSML text as DeepSeek-V4 writes tool calls (and chat.EncodeDeepSeekV4
// renders them), written out here rather than made by the code under test.
type dsmlParam struct {
	name, value string
	str         bool // string="true"
}

func dsmlInvoke(name string, params ...dsmlParam) string {
	var b strings.Builder
	b.WriteString("<｜DSML｜invoke name=\"" + name + "\">\n")
	for _, p := range params {
		s := "false"
		if p.str {
			s = "true"
		}
		b.WriteString("<｜DSML｜parameter name=\"" + p.name + "\" string=\"" + s + "\">" + p.value + "</｜DSML｜parameter>\n")
	}
	b.WriteString("</｜DSML｜invoke>")
	return b.String()
}

func dsmlBlock(invokes ...string) string {
	return "<｜DSML｜tool_calls>\n" + strings.Join(invokes, "\n") + "\n</｜DSML｜tool_calls>"
}

// twoCalls is a reply with some text and two tool calls; wantCalls is what
// they mean.
var (
	twoCallsBlock = dsmlBlock(
		dsmlInvoke("get_weather", dsmlParam{"location", "Paris, France", true}, dsmlParam{"days", "3", false}),
		dsmlInvoke("get_time", dsmlParam{"zone", "Europe/Paris", true}, dsmlParam{"formats", `["iso", "unix"]`, false}))
	twoCalls  = "Let me check both.\n\n" + twoCallsBlock
	wantCalls = []struct {
		name string
		args map[string]any
	}{
		{"get_weather", map[string]any{"location": "Paris, France", "days": 3.0}},
		{"get_time", map[string]any{"zone": "Europe/Paris", "formats": []any{"iso", "unix"}}},
	}
)

var timeTool = openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
	Name:       "get_time",
	Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"zone": map[string]any{"type": "string"}}},
})

// checkCall compares one call with wantCalls[i].
func checkCall(t *testing.T, what string, i int, name, args string) {
	t.Helper()
	var got map[string]any
	if err := json.Unmarshal([]byte(args), &got); err != nil {
		t.Fatalf("%s: call %d arguments %q are not JSON: %v", what, i, args, err)
	}
	if name != wantCalls[i].name || !reflect.DeepEqual(got, wantCalls[i].args) {
		t.Errorf("%s: call %d is %s(%s), want %s(%v)", what, i, name, args, wantCalls[i].name, wantCalls[i].args)
	}
}

// noMarkup fails when streamed text shows any part of the markup the
// parser must hold back.
func noMarkup(t *testing.T, what, text string) {
	t.Helper()
	for _, m := range []string{"<｜", "DSML", "｜", "</think>", "invoke", "parameter"} {
		if strings.Contains(text, m) {
			t.Errorf("%s leaks markup %q: %q", what, m, text)
		}
	}
}

// TestToolCallsChat: a model that writes two DSML tool calls after some
// text gives, through /v1/chat/completions, that text as content and two
// tool_calls with the arguments the DSML means, non-streaming and
// streaming; the stream never shows markup in its content deltas (the
// model's text arrives a token at a time, the block split across many
// deltas), and the SDK's accumulator rebuilds the same calls.
func TestToolCallsChat(t *testing.T) {
	h := newScriptedHarness(t, twoCalls, false)
	if n := len(h.tok.Encode(twoCallsBlock, true)); n < 20 {
		t.Fatalf("the block is %d tokens; the test wants it split across many", n)
	}
	params := openai.ChatCompletionNewParams{
		Model:    "strata-test",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather and time in Paris?")},
		Tools:    []openai.ChatCompletionToolUnionParam{weatherTool, timeTool},
	}
	check := func(mode string, m openai.ChatCompletionMessage, finish string) {
		t.Helper()
		if finish != "tool_calls" || m.Content != "Let me check both." || len(m.ToolCalls) != 2 {
			t.Fatalf("%s: finish %q content %q, %d calls", mode, finish, m.Content, len(m.ToolCalls))
		}
		for i, c := range m.ToolCalls {
			checkCall(t, mode, i, c.Function.Name, c.Function.Arguments)
		}
		if m.ToolCalls[0].ID == m.ToolCalls[1].ID || !strings.HasPrefix(m.ToolCalls[1].ID, "call_") {
			t.Errorf("%s: call ids %q, %q", mode, m.ToolCalls[0].ID, m.ToolCalls[1].ID)
		}
	}
	resp, err := h.client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	check("non-streaming", resp.Choices[0].Message, resp.Choices[0].FinishReason)

	chunks, acc := streamChat(t, h, params)
	check("streaming", acc.Choices[0].Message, acc.Choices[0].FinishReason)
	deltas := 0
	for _, c := range chunks {
		for _, cc := range c.Choices {
			noMarkup(t, "streamed content", cc.Delta.Content)
			if cc.Delta.Content != "" {
				deltas++
			}
		}
	}
	if deltas < 2 {
		t.Errorf("the content came in %d deltas; the test wants it streamed token by token", deltas)
	}

	// parallel_tool_calls false keeps the first call.
	params.ParallelToolCalls = openai.Bool(false)
	resp, err = h.client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if m := resp.Choices[0].Message; len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "get_weather" {
		t.Errorf("parallel_tool_calls false: %d calls", len(m.ToolCalls))
	}
	h.waitIdle()
}

// TestToolCallsUnclosedThinking: in thinking mode a model that calls tools
// without closing </think> still makes tool calls, and its reasoning stops
// before them: through chat completions (content null), Anthropic messages
// (a thinking block, then tool_use blocks) and responses (a reasoning item,
// then function_call items), streaming and not; no markup is streamed as
// reasoning.
func TestToolCallsUnclosedThinking(t *testing.T) {
	const reasoning = "I need the weather and the time."
	h := newScriptedHarness(t, reasoning+"\n\n"+twoCallsBlock, true)
	ctx := context.Background()
	think := option.WithJSONSet("reasoning_effort", "high")

	t.Run("chat", func(t *testing.T) {
		params := openai.ChatCompletionNewParams{Model: "strata-test", Tools: []openai.ChatCompletionToolUnionParam{weatherTool, timeTool},
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather and time in Paris?")}}
		resp, err := h.client.Chat.Completions.New(ctx, params, think)
		if err != nil {
			t.Fatal(err)
		}
		m := resp.Choices[0].Message
		var r string
		json.Unmarshal([]byte(m.JSON.ExtraFields["reasoning_content"].Raw()), &r)
		if r != reasoning || m.JSON.Content.Raw() != "null" || len(m.ToolCalls) != 2 || resp.Choices[0].FinishReason != "tool_calls" {
			t.Fatalf("reasoning %q, content %s, %d calls, finish %q", r, m.JSON.Content.Raw(), len(m.ToolCalls), resp.Choices[0].FinishReason)
		}
		for i, c := range m.ToolCalls {
			checkCall(t, "chat", i, c.Function.Name, c.Function.Arguments)
		}
		chunks, acc := streamChat(t, h, params, think)
		var streamed strings.Builder
		for _, c := range chunks {
			for _, cc := range c.Choices {
				var d string
				json.Unmarshal([]byte(cc.Delta.JSON.ExtraFields["reasoning_content"].Raw()), &d)
				noMarkup(t, "streamed reasoning", d)
				streamed.WriteString(d)
			}
		}
		if streamed.String() != reasoning || len(acc.Choices[0].Message.ToolCalls) != 2 {
			t.Errorf("streamed reasoning %q, %d calls", streamed.String(), len(acc.Choices[0].Message.ToolCalls))
		}
	})

	t.Run("anthropic", func(t *testing.T) {
		ac := h.anthropic()
		params := anthropic.MessageNewParams{Model: "strata-test", MaxTokens: 2000, Tools: anthropicTools(),
			Thinking: anthropic.ThinkingConfigParamUnion{OfEnabled: &anthropic.ThinkingConfigEnabledParam{BudgetTokens: 1024}},
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather and time in Paris?"))}}
		check := func(mode string, m *anthropic.Message) {
			t.Helper()
			if m.StopReason != "tool_use" || len(m.Content) != 3 || m.Content[0].Type != "thinking" || m.Content[0].Thinking != reasoning {
				t.Fatalf("%s: stop %q, content %s", mode, m.StopReason, m.RawJSON())
			}
			for i, b := range m.Content[1:] {
				if b.Type != "tool_use" {
					t.Fatalf("%s: block %d is %q", mode, i+1, b.Type)
				}
				checkCall(t, mode, i, b.Name, string(b.Input))
			}
		}
		m, err := ac.Messages.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		check("non-streaming", m)
		acc := streamAnthropic(t, ac, params, func(ev anthropic.MessageStreamEventUnion) {
			if ev.Type == "content_block_delta" {
				noMarkup(t, "streamed thinking", ev.Delta.Thinking)
			}
		})
		check("streaming", acc)
	})

	t.Run("responses", func(t *testing.T) {
		params := responses.ResponseNewParams{Model: "strata-test", Tools: responsesTools(),
			Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortHigh},
			Input:     responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather and time in Paris?")}}
		check := func(mode string, r *responses.Response) {
			t.Helper()
			if r.Status != "completed" || len(r.Output) != 3 || r.Output[0].Type != "reasoning" {
				t.Fatalf("%s: status %q output %s", mode, r.Status, r.RawJSON())
			}
			if got := r.Output[0].Content[0].Text; got != reasoning {
				t.Errorf("%s: reasoning %q", mode, got)
			}
			for i, it := range r.Output[1:] {
				if it.Type != "function_call" {
					t.Fatalf("%s: item %d is %q", mode, i+1, it.Type)
				}
				checkCall(t, mode, i, it.Name, it.Arguments.OfString)
			}
		}
		r, err := h.client.Responses.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		check("non-streaming", r)
		final, events := streamResponses(t, h, params)
		check("streaming", final)
		for _, ev := range events {
			if ev.Type == "response.reasoning_text.delta" {
				noMarkup(t, "streamed reasoning", ev.Delta)
			}
		}
	})
	h.waitIdle()
}

// anthropic is an Anthropic SDK client for the harness's server.
func (h *harness) anthropic(opts ...aoption.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]aoption.RequestOption{aoption.WithBaseURL(h.url + "/"), aoption.WithAPIKey("unused"), aoption.WithMaxRetries(0)}, opts...)...)
}

func anthropicTools() []anthropic.ToolUnionParam {
	return []anthropic.ToolUnionParam{
		{OfTool: &anthropic.ToolParam{Name: "get_weather", Description: anthropic.String("Weather forecast for a city."),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"location": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}}}}},
		{OfTool: &anthropic.ToolParam{Name: "get_time",
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"zone": map[string]any{"type": "string"}}}}},
	}
}

func responsesTools() []responses.ToolUnionParam {
	return []responses.ToolUnionParam{
		responses.ToolParamOfFunction("get_weather", map[string]any{"type": "object", "properties": map[string]any{"location": map[string]any{"type": "string"}}}, false),
		responses.ToolParamOfFunction("get_time", map[string]any{"type": "object", "properties": map[string]any{"zone": map[string]any{"type": "string"}}}, false),
	}
}

// streamAnthropic streams a message with the Anthropic SDK, passes each
// event to each (when set), and returns the SDK's accumulated message.
func streamAnthropic(t *testing.T, c anthropic.Client, p anthropic.MessageNewParams, each func(anthropic.MessageStreamEventUnion)) *anthropic.Message {
	t.Helper()
	s := c.Messages.NewStreaming(context.Background(), p)
	defer s.Close()
	var m anthropic.Message
	for s.Next() {
		ev := s.Current()
		if each != nil {
			each(ev)
		}
		if err := m.Accumulate(ev); err != nil {
			t.Fatalf("the SDK refused event %s: %v", ev.RawJSON(), err)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return &m
}

// streamResponses streams a response with openai-go and returns the
// response of its last event and every event.
func streamResponses(t *testing.T, h *harness, p responses.ResponseNewParams, opts ...option.RequestOption) (*responses.Response, []responses.ResponseStreamEventUnion) {
	t.Helper()
	s := h.client.Responses.NewStreaming(context.Background(), p, opts...)
	defer s.Close()
	var events []responses.ResponseStreamEventUnion
	for s.Next() {
		events = append(events, s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(events) == 0 {
		t.Fatal("no events")
	}
	last := events[len(events)-1]
	if last.Type != "response.completed" && last.Type != "response.incomplete" {
		t.Fatalf("the stream ends with %q: %s", last.Type, last.RawJSON())
	}
	for i, ev := range events {
		if ev.SequenceNumber != int64(i) {
			t.Fatalf("event %d (%s) has sequence number %d", i, ev.Type, ev.SequenceNumber)
		}
	}
	return &last.Response, events
}

// TestToolCallsAnthropic: through the Messages API, streaming and not, the
// model's text and two DSML calls become a text block and two tool_use
// blocks with the calls' input (stop_reason tool_use), the stream's
// input_json_delta events rebuild the same input in the SDK's accumulator,
// and sending the tool results back renders the prompt DeepSeek-V4's
// encoding gives the same conversation in OpenAI's shape.
func TestToolCallsAnthropic(t *testing.T) {
	h := newScriptedHarness(t, twoCalls, false)
	ac := h.anthropic()
	ctx := context.Background()
	params := anthropic.MessageNewParams{Model: "strata-test", MaxTokens: 1000, Tools: anthropicTools(),
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather and time in Paris?"))}}
	check := func(mode string, m *anthropic.Message) {
		t.Helper()
		if m.StopReason != "tool_use" || len(m.Content) != 3 || m.Content[0].Type != "text" || m.Content[0].Text != "Let me check both." {
			t.Fatalf("%s: stop %q content %s", mode, m.StopReason, m.RawJSON())
		}
		for i, b := range m.Content[1:] {
			if b.Type != "tool_use" || !strings.HasPrefix(b.ID, "toolu_") {
				t.Fatalf("%s: block %d: %s", mode, i+1, b.RawJSON())
			}
			checkCall(t, mode, i, b.Name, string(b.Input))
		}
		if want := len(h.tok.Encode(twoCalls, true)) + 1; m.Usage.OutputTokens != int64(want) {
			t.Errorf("%s: %d output tokens, want %d", mode, m.Usage.OutputTokens, want)
		}
	}
	m, err := ac.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	check("non-streaming", m)
	var texts []string
	streamed := streamAnthropic(t, ac, params, func(ev anthropic.MessageStreamEventUnion) {
		if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
			noMarkup(t, "streamed text", ev.Delta.Text)
			texts = append(texts, ev.Delta.Text)
		}
	})
	check("streaming", streamed)
	if len(texts) < 2 {
		t.Errorf("the text came in %d deltas", len(texts))
	}

	// The results go back as tool_result blocks; the prompt is the one the
	// same conversation renders to in OpenAI's shape.
	next := params
	next.Messages = append(slices.Clone(params.Messages), m.ToParam(), anthropic.NewUserMessage(
		anthropic.NewToolResultBlock(m.Content[1].ID, "Sunny, 21°C", false),
		anthropic.NewToolResultBlock(m.Content[2].ID, "10:00", false)))
	count, err := ac.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "strata-test", Messages: next.Messages, Tools: countTools(anthropicTools())})
	if err != nil {
		t.Fatal(err)
	}
	id1, id2 := m.Content[1].ID, m.Content[2].ID
	conv := []chat.Message{
		{Role: chat.RoleUser, Content: "Weather and time in Paris?"},
		{Role: chat.RoleAssistant, Content: "Let me check both.", ToolCalls: []chat.ToolCall{
			{ID: id1, Name: "get_weather", Arguments: string(m.Content[1].Input)}, {ID: id2, Name: "get_time", Arguments: string(m.Content[2].Input)}}},
		{Role: chat.RoleTool, ToolCallID: id1, Content: "Sunny, 21°C"},
		{Role: chat.RoleTool, ToolCallID: id2, Content: "10:00"},
	}
	if want := h.promptTokens(conv, chatTools(anthropicTools()), ChatOptions{}); count.InputTokens != int64(want) {
		t.Errorf("count_tokens of the continued conversation: %d, want %d", count.InputTokens, want)
	}
	if _, err := ac.Messages.New(ctx, next); err != nil {
		t.Fatal(err)
	}
	h.waitIdle()
}

// countTools converts tools for count_tokens.
func countTools(ts []anthropic.ToolUnionParam) []anthropic.MessageCountTokensToolUnionParam {
	out := make([]anthropic.MessageCountTokensToolUnionParam, len(ts))
	for i, t := range ts {
		out[i] = anthropic.MessageCountTokensToolUnionParam{OfTool: t.OfTool}
	}
	return out
}

// chatTools are ts as the server renders them: a function per tool, its
// input schema as the parameters, in the order name, description,
// parameters.
func chatTools(ts []anthropic.ToolUnionParam) []chat.Tool {
	out := make([]chat.Tool, len(ts))
	for i, t := range ts {
		schema, _ := json.Marshal(t.OfTool.InputSchema)
		out[i] = chat.Tool{Type: "function", Function: chat.ToolFunction{Name: t.OfTool.Name, Description: t.OfTool.Description.Value, Parameters: schema}}
	}
	return out
}

// TestToolCallsResponses: through the Responses API, streaming and not,
// the text and two DSML calls become a message item and two function_call
// items (each with its call_id); the stream's events carry the same text
// and arguments, sequence numbers in order; and function_call_output items
// sent with previous_response_id continue the stored conversation.
func TestToolCallsResponses(t *testing.T) {
	h := newScriptedHarness(t, twoCalls, false)
	ctx := context.Background()
	params := responses.ResponseNewParams{Model: "strata-test", Tools: responsesTools(),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather and time in Paris?")}}
	check := func(mode string, r *responses.Response) {
		t.Helper()
		if r.Status != "completed" || len(r.Output) != 3 || r.Output[0].Type != "message" || r.OutputText() != "Let me check both." {
			t.Fatalf("%s: status %q, output %s", mode, r.Status, r.RawJSON())
		}
		for i, it := range r.Output[1:] {
			if it.Type != "function_call" || !strings.HasPrefix(it.CallID, "call_") || !strings.HasPrefix(it.ID, "fc_") {
				t.Fatalf("%s: item %d: %s", mode, i+1, it.RawJSON())
			}
			checkCall(t, mode, i, it.Name, it.Arguments.OfString)
		}
	}
	r, err := h.client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	check("non-streaming", r)
	final, events := streamResponses(t, h, params)
	check("streaming", final)
	var text strings.Builder
	args := map[string]*strings.Builder{}
	for _, ev := range events {
		switch ev.Type {
		case "response.output_text.delta":
			noMarkup(t, "streamed text", ev.Delta)
			text.WriteString(ev.Delta)
		case "response.function_call_arguments.delta":
			if args[ev.ItemID] == nil {
				args[ev.ItemID] = &strings.Builder{}
			}
			args[ev.ItemID].WriteString(ev.Delta)
		}
	}
	if text.String() != final.OutputText() {
		t.Errorf("streamed text %q, final %q", text.String(), final.OutputText())
	}
	for i, it := range final.Output[1:] {
		if b := args[it.ID]; b == nil || b.String() != it.Arguments.OfString {
			t.Errorf("call %d: streamed arguments %v, final %q", i, b, it.Arguments.OfString)
		}
	}

	// Continue with the calls' results.
	next := responses.ResponseNewParams{Model: "strata-test", Tools: responsesTools(), PreviousResponseID: openai.String(r.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			callOutput(r.Output[1].CallID, "Sunny, 21°C"),
			callOutput(r.Output[2].CallID, "10:00"),
		}}}
	r2, err := h.client.Responses.New(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	conv := []chat.Message{
		{Role: chat.RoleUser, Content: "Weather and time in Paris?"},
		{Role: chat.RoleAssistant, Content: "Let me check both.", ToolCalls: []chat.ToolCall{
			{ID: r.Output[1].CallID, Name: "get_weather", Arguments: r.Output[1].Arguments.OfString},
			{ID: r.Output[2].CallID, Name: "get_time", Arguments: r.Output[2].Arguments.OfString}}},
		{Role: chat.RoleTool, ToolCallID: r.Output[1].CallID, Content: "Sunny, 21°C"},
		{Role: chat.RoleTool, ToolCallID: r.Output[2].CallID, Content: "10:00"},
	}
	tools := []chat.Tool{
		{Type: "function", Function: chat.ToolFunction{Name: "get_weather", Parameters: json.RawMessage(`{"properties":{"location":{"type":"string"}},"type":"object"}`)}},
		{Type: "function", Function: chat.ToolFunction{Name: "get_time", Parameters: json.RawMessage(`{"properties":{"zone":{"type":"string"}},"type":"object"}`)}},
	}
	if want := h.promptTokens(conv, tools, ChatOptions{KeepReasoning: true}); r2.Usage.InputTokens != int64(want) {
		t.Errorf("the continuation's prompt has %d tokens, want %d (the conversation with the results)", r2.Usage.InputTokens, want)
	}
	h.waitIdle()
}

// callOutput is a function_call_output input item.
func callOutput(callID, output string) responses.ResponseInputItemUnionParam {
	it := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	it.OfFunctionCallOutput.CallID = openai.String(callID)
	return it
}
