package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/grammar"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/model/gemma4"
	"github.com/strata-inference/strata/tokenizer"
	"github.com/strata-inference/strata/tokenizer/chat"
)

// Structured output and forced tool calls through the Responses and
// Messages APIs (and strict tools through all three chat APIs), with the
// official SDKs against a live server. The shipped model's text is
// garbage; what the constraint makes of it must still parse and validate.

// anthropicInputSchema is an object schema as the Anthropic SDK's input
// schema: properties and required in their fields, any other keyword
// (additionalProperties, say) as an extra field.
func anthropicInputSchema(t *testing.T, schema string) anthropic.ToolInputSchemaParam {
	t.Helper()
	m := schemaMap(t, schema)
	p := anthropic.ToolInputSchemaParam{Properties: m["properties"]}
	if r, ok := m["required"].([]any); ok {
		for _, x := range r {
			p.Required = append(p.Required, x.(string))
		}
	}
	for k, v := range m {
		if k != "properties" && k != "required" && k != "type" {
			if p.ExtraFields == nil {
				p.ExtraFields = map[string]any{}
			}
			p.ExtraFields[k] = v
		}
	}
	return p
}

// responsesFunctionCalls returns a response's function_call items, and
// fails on any other item but a message.
func responsesFunctionCalls(t *testing.T, what string, r *responses.Response) []responses.ResponseOutputItemUnion {
	t.Helper()
	var calls []responses.ResponseOutputItemUnion
	for _, it := range r.Output {
		switch it.Type {
		case "function_call":
			calls = append(calls, it)
		case "message", "reasoning":
		default:
			t.Fatalf("%s: output item of type %q", what, it.Type)
		}
	}
	return calls
}

// TestResponsesStructuredOutput: text.format json_schema through openai-go,
// greedy and sampled, streaming and not: the output text parses and
// validates against the schema, the response completes because the
// document is complete, text.format is echoed, and the stream's deltas add
// up to the same text; json_object gives an object.
func TestResponsesStructuredOutput(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	val := schemaValidator(t, personSchema)
	params := responses.ResponseNewParams{Model: "strata-test", MaxOutputTokens: openai.Int(600), Temperature: openai.Float(0),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Who was Moses? Answer in JSON.")},
		Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{
			Name: "person", Schema: schemaMap(t, personSchema), Strict: openai.Bool(true)}}}}
	r, err := h.client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "completed" || len(r.Output) != 1 || r.Output[0].Type != "message" {
		t.Fatalf("status %q, output %s", r.Status, r.RawJSON())
	}
	mustValidate(t, val, "output text", r.OutputText())
	if f := r.Text.Format; f.Type != "json_schema" || f.Name != "person" || !f.Strict {
		t.Errorf("text.format echoed as %s", f.RawJSON())
	}
	t.Logf("greedy: %s", r.OutputText())

	final, events := streamResponses(t, h, params)
	var text strings.Builder
	for _, ev := range events {
		if ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
		}
	}
	if final.Status != "completed" || text.String() != final.OutputText() || final.OutputText() != r.OutputText() {
		t.Errorf("streamed: status %q, deltas %q, final %q; not streamed %q", final.Status, text.String(), final.OutputText(), r.OutputText())
	}

	sampled := params
	sampled.Temperature = openai.Float(1)
	for seed := range 2 {
		r, err := h.client.Responses.New(ctx, sampled, option.WithJSONSet("seed", seed))
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != "completed" {
			t.Fatalf("sampled, seed %d: status %q (%q)", seed, r.Status, r.OutputText())
		}
		mustValidate(t, val, "sampled output text", r.OutputText())
	}

	obj := params
	obj.MaxOutputTokens = openai.Int(200)
	obj.Text = responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}}
	r, err = h.client.Responses.New(ctx, obj)
	if err != nil {
		t.Fatal(err)
	}
	switch r.Status {
	case "completed":
		var m map[string]any
		if err := json.Unmarshal([]byte(r.OutputText()), &m); err != nil {
			t.Fatalf("json_object: %q is not an object: %v", r.OutputText(), err)
		}
	case "incomplete": // an unbounded object can outlast any budget
		if !strings.HasPrefix(r.OutputText(), "{") {
			t.Fatalf("json_object: cut text %q does not start an object", r.OutputText())
		}
	default:
		t.Fatalf("json_object: status %q", r.Status)
	}
	if r.Text.Format.Type != "json_object" {
		t.Errorf("text.format echoed as %s", r.Text.Format.RawJSON())
	}
	h.waitIdle()
}

// TestMessagesStructuredOutput: output_config.format through the Anthropic
// SDK, streaming and not: the reply is one text block that validates
// against the schema, stop_reason end_turn.
func TestMessagesStructuredOutput(t *testing.T) {
	h := newHarness(t)
	ac := h.anthropic(aoption.WithJSONSet("temperature", 0)) // the SDK has no temperature field
	val := schemaValidator(t, personSchema)
	params := anthropic.MessageNewParams{Model: "strata-test", MaxTokens: 600,
		Messages:     []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Who was Moses? Answer in JSON."))},
		OutputConfig: anthropic.OutputConfigParam{Format: anthropic.JSONOutputFormatParam{Schema: schemaMap(t, personSchema)}}}
	m, err := ac.Messages.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	streamed := streamAnthropic(t, ac, params, nil)
	for mode, m := range map[string]*anthropic.Message{"non-streaming": m, "streaming": streamed} {
		if m.StopReason != "end_turn" || len(m.Content) != 1 || m.Content[0].Type != "text" {
			t.Fatalf("%s: stop %q, content %s", mode, m.StopReason, m.RawJSON())
		}
		mustValidate(t, val, mode+" text", m.Content[0].Text)
	}
	if m.Content[0].Text != streamed.Content[0].Text {
		t.Errorf("greedy: streamed %q, not streamed %q", streamed.Content[0].Text, m.Content[0].Text)
	}
	t.Logf("%s", m.Content[0].Text)

	if m, err = ac.Messages.New(context.Background(), params, aoption.WithJSONSet("temperature", 1)); err != nil {
		t.Fatal(err)
	}
	if m.StopReason != "end_turn" {
		t.Fatalf("sampled: stop %q (%s)", m.StopReason, m.RawJSON())
	}
	mustValidate(t, val, "sampled text", m.Content[0].Text)
	h.waitIdle()
}

// forcedToolVals validate the arguments of the tools the forced-call tests
// offer (weatherParams and psalmParams of structured_test.go).
func forcedToolVals(t *testing.T) map[string]*jsonschema.Schema {
	return map[string]*jsonschema.Schema{"get_weather": schemaValidator(t, weatherParams), "find_psalm": schemaValidator(t, psalmParams)}
}

// TestResponsesForcedToolCalls: tool_choice "required" and a named
// function through openai-go, streaming and not, with strict (the
// default) and non-strict tools: the output is function_call items of the
// tools (only the named one; one with parallel_tool_calls false) whose
// arguments validate against the tool's parameters, and tool_choice is
// echoed.
func TestResponsesForcedToolCalls(t *testing.T) {
	h := newHarness(t)
	vals := forcedToolVals(t)
	tools := []responses.ToolUnionParam{
		{OfFunction: &responses.FunctionToolParam{Name: "get_weather", Description: openai.String("Weather in a city"), Parameters: schemaMap(t, weatherParams)}},
		responses.ToolParamOfFunction("find_psalm", schemaMap(t, psalmParams), false),
	}
	for _, tc := range []struct {
		name     string
		choice   responses.ResponseNewParamsToolChoiceUnion
		parallel bool
		want     string // the function that must be called ("": either)
		stream   bool
	}{
		{"required", responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsRequired)}, true, "", true},
		{"required, one call", responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsRequired)}, false, "", false},
		{"named", responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: "find_psalm"}}, true, "find_psalm", false},
		{"named, streamed", responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: "get_weather"}}, true, "get_weather", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := responses.ResponseNewParams{Model: "strata-test", MaxOutputTokens: openai.Int(400), Temperature: openai.Float(0.9),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What is the weather in Jerusalem?")},
				Tools: tools, ToolChoice: tc.choice, ParallelToolCalls: openai.Bool(tc.parallel)}
			var r *responses.Response
			if tc.stream {
				r, _ = streamResponses(t, h, params, option.WithJSONSet("seed", 5))
			} else {
				var err error
				if r, err = h.client.Responses.New(context.Background(), params, option.WithJSONSet("seed", 5)); err != nil {
					t.Fatal(err)
				}
			}
			calls := responsesFunctionCalls(t, tc.name, r)
			if r.Status != "completed" || len(calls) == 0 || r.OutputText() != "" {
				t.Fatalf("status %q, %d calls, text %q", r.Status, len(calls), r.OutputText())
			}
			if (tc.want != "" || !tc.parallel) && len(calls) != 1 {
				t.Errorf("%d calls, want one", len(calls))
			}
			for _, c := range calls {
				v := vals[c.Name]
				if v == nil || (tc.want != "" && c.Name != tc.want) {
					t.Fatalf("called %q", c.Name)
				}
				mustValidate(t, v, "arguments of "+c.Name, c.Arguments.OfString)
			}
			echo := r.ToolChoice.RawJSON()
			if tc.want == "" && echo != `"required"` || tc.want != "" && !strings.Contains(echo, tc.want) {
				t.Errorf("tool_choice echoed as %s", echo)
			}
			t.Logf("%s(%s)", calls[0].Name, calls[0].Arguments.OfString)
		})
	}
	h.waitIdle()
}

// TestMessagesForcedToolCalls: Anthropic's tool_choice any and tool
// through the Anthropic SDK, streaming and not: the reply is tool_use
// blocks (only the named tool's; one with disable_parallel_tool_use) whose
// input validates against the tool's input_schema, stop_reason tool_use.
func TestMessagesForcedToolCalls(t *testing.T) {
	h := newHarness(t)
	ac := h.anthropic(aoption.WithJSONSet("temperature", 0.9))
	vals := forcedToolVals(t)
	tools := []anthropic.ToolUnionParam{
		{OfTool: &anthropic.ToolParam{Name: "get_weather", Description: anthropic.String("Weather in a city"), InputSchema: anthropicInputSchema(t, weatherParams)}},
		{OfTool: &anthropic.ToolParam{Name: "find_psalm", InputSchema: anthropicInputSchema(t, psalmParams)}},
	}
	for _, tc := range []struct {
		name   string
		choice anthropic.ToolChoiceUnionParam
		one    bool
		want   string
		stream bool
	}{
		{"any", anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{}}, false, "", true},
		{"any, one call", anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{DisableParallelToolUse: anthropic.Bool(true)}}, true, "", false},
		{"tool", anthropic.ToolChoiceUnionParam{OfTool: &anthropic.ToolChoiceToolParam{Name: "find_psalm"}}, true, "find_psalm", false},
		{"tool, streamed", anthropic.ToolChoiceUnionParam{OfTool: &anthropic.ToolChoiceToolParam{Name: "get_weather"}}, true, "get_weather", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := anthropic.MessageNewParams{Model: "strata-test", MaxTokens: 400, Tools: tools, ToolChoice: tc.choice,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Jerusalem?"))}}
			var m *anthropic.Message
			if tc.stream {
				m = streamAnthropic(t, ac, params, nil)
			} else {
				var err error
				if m, err = ac.Messages.New(context.Background(), params); err != nil {
					t.Fatal(err)
				}
			}
			if m.StopReason != "tool_use" || len(m.Content) == 0 {
				t.Fatalf("stop %q, content %s", m.StopReason, m.RawJSON())
			}
			if tc.one && len(m.Content) != 1 {
				t.Errorf("%d blocks, want one tool_use", len(m.Content))
			}
			for _, b := range m.Content {
				v := vals[b.Name]
				if b.Type != "tool_use" || v == nil || (tc.want != "" && b.Name != tc.want) {
					t.Fatalf("block %s", b.RawJSON())
				}
				mustValidate(t, v, "input of "+b.Name, string(b.Input))
			}
			t.Logf("%s(%s)", m.Content[0].Name, m.Content[0].Input)
		})
	}
	h.waitIdle()
}

// strictScript is a reply whose tool call breaks get_weather's parameter
// schema (weatherParams) three ways: a city too long, days a string, units
// not in the enum.
var strictScript = "Let me look.\n\n" + dsmlBlock(dsmlInvoke("get_weather",
	dsmlParam{"city", "Jerusalem, the holy city", true}, dsmlParam{"days", `"two"`, false}, dsmlParam{"units", "kelvin", true}))

// TestStrictTools: a scripted model that calls get_weather with arguments
// its schema refuses. Where the tool is strict (Responses: by default;
// chat: function.strict true; Anthropic: strict true) the call that comes
// back validates, because the constraint steered the model off the
// invalid tokens, and the text before it is the model's own; where it is
// not (strict false, or absent on chat and Anthropic) the call is exactly
// the model's, invalid.
func TestStrictTools(t *testing.T) {
	h := newScriptedHarness(t, strictScript, false)
	ctx := context.Background()
	val := schemaValidator(t, weatherParams)
	check := func(api string, strict bool, text, name, args string) {
		t.Helper()
		if name != "get_weather" || text != "Let me look." {
			t.Fatalf("%s, strict %v: text %q, call %q", api, strict, text, name)
		}
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
		if err != nil {
			t.Fatalf("%s, strict %v: arguments %q: %v", api, strict, args, err)
		}
		err = val.Validate(inst)
		if strict && err != nil {
			t.Errorf("%s, strict: arguments %s do not validate: %v", api, args, err)
		}
		var got map[string]any
		json.Unmarshal([]byte(args), &got)
		if !strict && (err == nil || !reflect.DeepEqual(got, map[string]any{"city": "Jerusalem, the holy city", "days": "two", "units": "kelvin"})) {
			t.Errorf("%s, not strict: arguments %s, want the scripted ones", api, args)
		}
		t.Logf("%s, strict %v: %s", api, strict, args)
	}
	input := responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Jerusalem?")}
	for _, strict := range []bool{true, false} {
		// Responses: strict unless strict is false.
		tool := responses.FunctionToolParam{Name: "get_weather", Parameters: schemaMap(t, weatherParams)}
		if !strict {
			tool.Strict = openai.Bool(false)
		}
		params := responses.ResponseNewParams{Model: "strata-test", Input: input, Temperature: openai.Float(0), Tools: []responses.ToolUnionParam{{OfFunction: &tool}}}
		r, err := h.client.Responses.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		calls := responsesFunctionCalls(t, "responses", r)
		if len(calls) != 1 {
			t.Fatalf("responses: %d calls: %s", len(calls), r.RawJSON())
		}
		check("responses", strict, r.OutputText(), calls[0].Name, calls[0].Arguments.OfString)
		final, _ := streamResponses(t, h, params)
		if calls := responsesFunctionCalls(t, "responses", final); len(calls) != 1 || calls[0].Arguments.OfString != r.Output[1].Arguments.OfString {
			t.Errorf("responses, streamed: %s", final.RawJSON())
		}

		// Chat: strict when function.strict is true.
		fn := shared.FunctionDefinitionParam{Name: "get_weather", Parameters: schemaMap(t, weatherParams)}
		if strict {
			fn.Strict = openai.Bool(true)
		}
		resp, err := h.client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "strata-test", Temperature: openai.Float(0),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Jerusalem?")},
			Tools:    []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(fn)}})
		if err != nil {
			t.Fatal(err)
		}
		if m := resp.Choices[0].Message; len(m.ToolCalls) != 1 {
			t.Fatalf("chat: %s", resp.RawJSON())
		} else {
			check("chat", strict, m.Content, m.ToolCalls[0].Function.Name, m.ToolCalls[0].Function.Arguments)
		}

		// Anthropic: strict when strict is true.
		at := anthropic.ToolParam{Name: "get_weather", InputSchema: anthropicInputSchema(t, weatherParams)}
		if strict {
			at.Strict = anthropic.Bool(true)
		}
		ac := h.anthropic(aoption.WithJSONSet("temperature", 0))
		m, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "strata-test", MaxTokens: 300,
			Tools:    []anthropic.ToolUnionParam{{OfTool: &at}},
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Jerusalem?"))}})
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Content) != 2 || m.StopReason != "tool_use" {
			t.Fatalf("anthropic: %s", m.RawJSON())
		}
		check("anthropic", strict, m.Content[0].Text, m.Content[1].Name, string(m.Content[1].Input))
	}
	h.waitIdle()
}

// TestStrictToolsFreeText: with strict tools and tool_choice auto, the
// shipped model's reply is free text (the constraint only keeps it from
// writing tool-call markup it does not complete), and it ends as the
// model ends it or at max_output_tokens.
func TestStrictToolsFreeText(t *testing.T) {
	h := newHarness(t)
	tools := []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "get_weather", Parameters: schemaMap(t, weatherParams)}}}
	for seed := range 2 {
		r, err := h.client.Responses.New(context.Background(), responses.ResponseNewParams{Model: "strata-test", MaxOutputTokens: openai.Int(40),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("And God said")}, Tools: tools}, option.WithJSONSet("seed", seed))
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != "completed" && r.Status != "incomplete" {
			t.Fatalf("status %q", r.Status)
		}
		noMarkup(t, "output text", r.OutputText())
		for _, c := range responsesFunctionCalls(t, "strict auto", r) {
			mustValidate(t, schemaValidator(t, weatherParams), "arguments", c.Arguments.OfString)
		}
		t.Logf("seed %d (%s): %q", seed, r.Status, r.OutputText())
	}
	h.waitIdle()
}

// TestQwen35Constrained: with the Qwen3.5 chat format the forced tool
// calls are the template's <tool_call> XML, which the Qwen parser reads
// back as calls whose arguments validate; structured output works through
// its reply parser too. The shipped model serves, through Qwen3.5's
// template.
func TestQwen35Constrained(t *testing.T) {
	h := newHarness(t, func(c *harnessConfig) { c.format = Qwen35(qwenTemplate(t)) })
	vals := forcedToolVals(t)
	tools := []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather", Parameters: schemaMap(t, weatherParams)}),
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "find_psalm", Parameters: schemaMap(t, psalmParams)}),
	}
	for _, tc := range []struct {
		name   string
		choice openai.ChatCompletionToolChoiceOptionUnionParam
		want   string
	}{
		{"required", openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}, ""},
		{"named", openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"}), "get_weather"},
	} {
		// One call: the shipped model, asked whether to make another,
		// goes on making calls until its budget runs out.
		params := openai.ChatCompletionNewParams{Model: "strata-test", MaxTokens: openai.Int(400), Temperature: openai.Float(0.9), Seed: openai.Int(3),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Jerusalem?")}, Tools: tools, ToolChoice: tc.choice,
			ParallelToolCalls: openai.Bool(false)}
		resp, err := h.client.Chat.Completions.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		_, acc := streamChat(t, h, params)
		for mode, c := range map[string]openai.ChatCompletionChoice{"non-streaming": resp.Choices[0], "streaming": acc.Choices[0]} {
			if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 || c.Message.Content != "" {
				t.Fatalf("%s, %s: finish %q, %d calls, content %q", tc.name, mode, c.FinishReason, len(c.Message.ToolCalls), c.Message.Content)
			}
			for _, call := range c.Message.ToolCalls {
				v := vals[call.Function.Name]
				if v == nil || (tc.want != "" && call.Function.Name != tc.want) {
					t.Fatalf("%s: called %q", tc.name, call.Function.Name)
				}
				mustValidate(t, v, tc.name+" arguments of "+call.Function.Name, call.Function.Arguments)
			}
		}
		t.Logf("%s: %s(%s)", tc.name, resp.Choices[0].Message.ToolCalls[0].Function.Name, resp.Choices[0].Message.ToolCalls[0].Function.Arguments)
	}
	r, err := h.client.Responses.New(context.Background(), responses.ResponseNewParams{Model: "strata-test", MaxOutputTokens: openai.Int(600), Temperature: openai.Float(0),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Who was Moses?")},
		Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{
			Name: "person", Schema: schemaMap(t, personSchema)}}}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "completed" {
		t.Fatalf("json_schema: status %q (%q)", r.Status, r.OutputText())
	}
	mustValidate(t, schemaValidator(t, personSchema), "Qwen3.5 output text", r.OutputText())
	h.waitIdle()
}

// TestReplyGrammarShapes: the grammars the server composes, read back by
// each format's parser: Qwen3.5's thinking prefix before a document or a
// forced call; strict tools with tool_choice auto as content and then
// maybe calls (a non-strict tool's arguments free); nothing to enforce for
// strict tools with a format that reads no tool calls.
func TestReplyGrammarShapes(t *testing.T) {
	weather := chat.Tool{Type: "function", Function: chat.ToolFunction{Name: "get_weather", Parameters: json.RawMessage(weatherParams)}}
	free := chat.Tool{Type: "function", Function: chat.ToolFunction{Name: "log", Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}}
	tools := []chat.Tool{weather, free}
	qwen := &Server{format: Qwen35(nil)}
	dsv4 := &Server{format: DeepSeekV4()}
	strict := structured{parallel: true, strict: map[string]bool{"get_weather": true}}
	qcall := "<tool_call>\n<function=get_weather>\n<parameter=city>\nUr\n</parameter>\n<parameter=units>\nfahrenheit\n</parameter>\n</function>\n</tool_call>"
	qbad := "<tool_call>\n<function=get_weather>\n<parameter=city>\nUr\n</parameter>\n<parameter=units>\nkelvin\n</parameter>\n</function>\n</tool_call>"
	qfree := "<tool_call>\n<function=log>\n<parameter=n>\nmany\n</parameter>\n</function>\n</tool_call>"
	dcall := "\n\n" + dsmlBlock(dsmlInvoke("get_weather", dsmlParam{"city", "Ur", true}, dsmlParam{"units", "celsius", true}))
	dbad := "\n\n" + dsmlBlock(dsmlInvoke("get_weather", dsmlParam{"city", "Ur", true}, dsmlParam{"units", "kelvin", true}))
	for _, tc := range []struct {
		name    string
		s       *Server
		st      structured
		opt     ChatOptions
		replies map[string]bool
		parse   func(string) (chat.Parsed, error)
	}{
		{"qwen3.5, thinking, json", qwen, structured{format: "json_object"}, ChatOptions{Thinking: true},
			map[string]bool{"Hmm.\n</think>\n\n{\"a\":1}": true, "{\"a\":1}": false, "Hmm.</think>\n\n[1]": false},
			func(s string) (chat.Parsed, error) { return chat.ParseQwen35(s, true, tools) }},
		{"qwen3.5, thinking, forced", qwen, structured{calls: "function", name: "get_weather", parallel: true}, ChatOptions{Thinking: true},
			map[string]bool{"ok\n</think>\n\n" + qcall: true, "ok\n</think>\n\n" + qbad: false, qcall: false},
			func(s string) (chat.Parsed, error) { return chat.ParseQwen35(s, true, tools) }},
		{"qwen3.5, strict, auto", qwen, strict, ChatOptions{},
			map[string]bool{"Plain text.": true, "Let me see.\n\n" + qcall: true, qcall + "\n" + qfree: true, "x " + qbad: false, "x <tool_call> y": false},
			func(s string) (chat.Parsed, error) { return chat.ParseQwen35(s, false, tools) }},
		{"deepseek-v4, strict, auto", dsv4, strict, ChatOptions{},
			map[string]bool{"Plain text.": true, "Let me see." + dcall: true, "x" + dbad: false, "x <｜DSML｜invoke": false},
			func(s string) (chat.Parsed, error) { return chat.ParseDeepSeekV4(s, false) }},
		{"deepseek-v4, thinking, strict, auto", dsv4, strict, ChatOptions{Thinking: true},
			map[string]bool{"I will call.</think>" + dcall: true, "I will call." + dcall + "</think>": false},
			func(s string) (chat.Parsed, error) { return chat.ParseDeepSeekV4(s, true) }},
	} {
		x, aerr := tc.s.replyGrammar(&tc.st, tools, tc.opt, true)
		if aerr != nil || x == nil {
			t.Fatalf("%s: %v", tc.name, aerr)
		}
		g, err := grammar.Compile(x)
		if err != nil {
			t.Fatal(err)
		}
		for reply, want := range tc.replies {
			if ok, _ := g.Recognize([]byte(reply)); ok != want {
				t.Errorf("%s: %q accepted %v, want %v", tc.name, reply, ok, want)
				continue
			}
			if !want {
				continue
			}
			p, err := tc.parse(reply)
			if err != nil {
				t.Errorf("%s: %q: %v", tc.name, reply, err)
			}
			if tc.st.format != "" && !json.Valid([]byte(p.Content)) {
				t.Errorf("%s: %q: content %q is not JSON", tc.name, reply, p.Content)
			}
			for _, c := range p.ToolCalls {
				if c.Name == "get_weather" {
					inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(c.Arguments))
					if err := schemaValidator(t, weatherParams).Validate(inst); err != nil {
						t.Errorf("%s: %q: arguments %s: %v", tc.name, reply, c.Arguments, err)
					}
				}
			}
		}
	}
	// Strict tools with a format that never reads tool calls: nothing to
	// enforce; forced calls there are refused.
	jinja := &Server{format: Jinja(nil)}
	if x, aerr := jinja.replyGrammar(&strict, tools, ChatOptions{}, true); x != nil || aerr != nil {
		t.Errorf("jinja, strict: grammar %v, error %v", x, aerr)
	}
	if _, aerr := jinja.replyGrammar(&structured{calls: "required", parallel: true}, tools, ChatOptions{}, true); aerr == nil || aerr.Param != "tool_choice" {
		t.Errorf("jinja, forced: %+v", aerr)
	}
}

// TestStrictChatErrors: chat's function.strict must be a boolean, and a
// strict tool whose schema uses a keyword the compiler lacks is a 400
// naming it, even with tool_choice auto; a tool that is not strict with
// such a schema is served.
func TestStrictChatErrors(t *testing.T) {
	h := newHarness(t)
	body := func(strict string) string {
		return `{"model":"strata-test","max_tokens":2,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"not":{}}}}` + strict + `}}]}`
	}
	for _, tc := range []struct {
		strict  string
		status  int
		mention string
	}{
		{`,"strict":"yes"`, 400, "tools[0].function.strict"},
		{`,"strict":true`, 400, `\"not\"`},
		{`,"strict":false`, 200, ""},
		{``, 200, ""},
	} {
		status, data := h.post("/v1/chat/completions", body(tc.strict))
		if status != tc.status || !strings.Contains(string(data), tc.mention) {
			t.Errorf("strict %q: status %d %s; want %d mentioning %s", tc.strict, status, data, tc.status, tc.mention)
		}
	}
	h.waitIdle()
}

// TestStructuredSchemaErrorsSDK: a schema the compiler refuses (a keyword
// it lacks, a $ref to nothing, a malformed keyword), given as text.format,
// output_config.format, a strict or forced tool, is a 400 that the
// official SDKs read as their error type, naming the parameter and the
// cause; none reaches the engine.
func TestStructuredSchemaErrorsSDK(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	ac := h.anthropic()
	for _, tc := range []struct {
		name    string
		schema  string
		mention string
	}{
		{"unsupported keyword", `{"type":"object","properties":{"a":{"type":"string","pattern":"\\bx"}}}`, `"pattern"`},
		{"not", `{"type":"object","properties":{"a":{"not":{}}}}`, `"not"`},
		{"dangling $ref", `{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}}`, "#/$defs/missing"},
		{"malformed minimum", `{"type":"object","properties":{"a":{"type":"integer","minimum":"one"}}}`, "minimum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			schema := schemaMap(t, tc.schema)
			input := responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}
			for _, rc := range []struct {
				what, param string
				p           responses.ResponseNewParams
			}{
				{"text.format", "text.format.schema", responses.ResponseNewParams{Model: "strata-test", Input: input,
					Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "x", Schema: schema}}}}},
				{"strict tool", "tools", responses.ResponseNewParams{Model: "strata-test", Input: input,
					Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "f", Parameters: schema}}}}},
				{"forced tool", "tools", responses.ResponseNewParams{Model: "strata-test", Input: input,
					Tools:      []responses.ToolUnionParam{responses.ToolParamOfFunction("f", schema, false)},
					ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsRequired)}}},
			} {
				_, err := h.client.Responses.New(ctx, rc.p)
				var oe *openai.Error
				if !errors.As(err, &oe) || oe.StatusCode != 400 || oe.Type != "invalid_request_error" || oe.Param != rc.param || !strings.Contains(oe.Message, tc.mention) {
					t.Errorf("responses, %s: %v; want a 400 on %s mentioning %s", rc.what, err, rc.param, tc.mention)
				}
			}
			msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}
			for _, mc := range []struct {
				what, param string
				p           anthropic.MessageNewParams
			}{
				{"output_config.format", "output_config.format.schema", anthropic.MessageNewParams{Model: "strata-test", MaxTokens: 5, Messages: msgs,
					OutputConfig: anthropic.OutputConfigParam{Format: anthropic.JSONOutputFormatParam{Schema: schema}}}},
				{"strict tool", "tools", anthropic.MessageNewParams{Model: "strata-test", MaxTokens: 5, Messages: msgs,
					Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "f", InputSchema: anthropicInputSchema(t, tc.schema), Strict: anthropic.Bool(true)}}}}},
				{"forced tool", "tools", anthropic.MessageNewParams{Model: "strata-test", MaxTokens: 5, Messages: msgs,
					Tools:      []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "f", InputSchema: anthropicInputSchema(t, tc.schema)}}},
					ToolChoice: anthropic.ToolChoiceUnionParam{OfTool: &anthropic.ToolChoiceToolParam{Name: "f"}}}},
			} {
				_, err := ac.Messages.New(ctx, mc.p)
				var ae *anthropic.Error
				var body struct {
					Error struct{ Type, Message string }
				}
				if !errors.As(err, &ae) || ae.StatusCode != 400 || json.Unmarshal([]byte(ae.RawJSON()), &body) != nil {
					t.Errorf("anthropic, %s: %v; want a 400", mc.what, err)
					continue
				}
				if body.Error.Type != "invalid_request_error" || !strings.HasPrefix(body.Error.Message, mc.param+": ") || !strings.Contains(body.Error.Message, tc.mention) {
					t.Errorf("anthropic, %s: %s; want an invalid_request_error on %s mentioning %s", mc.what, ae.RawJSON(), mc.param, tc.mention)
				}
			}
		})
	}
	if st := h.eng.Stats(); st.Steps != 0 {
		t.Errorf("refused requests reached the engine: %+v", st)
	}
}

// formatServer is a live server in one chat format, with clients of the
// Responses and Messages APIs.
type formatServer struct {
	name string
	oa   openai.Client
	an   anthropic.Client // greedy
	// stream: the Messages cases are streamed too (not on the random
	// models, whose steps are slower).
	stream bool
	// thinking: thinking mode is tested too (not with the shipped model,
	// which never closes its reasoning; TestReplyGrammarShapes checks
	// Qwen3.5's reasoning prefix).
	thinking bool
}

// toolGrammarServers serves every chat format that has a tool grammar but
// DeepSeek-V4 (the harness's, tested above): random-weight DeepSeek-V3.2
// and GLM-5 in their families' formats, the shipped model in Qwen3.5's
// template (the random models in thinking mode too: they close their
// reasoning within the budget).
func toolGrammarServers(t *testing.T) []formatServer {
	var out []formatServer
	for _, family := range []string{"deepseek-v3.2", "glm-5"} {
		d := newDSAServer(t, family)
		out = append(out, formatServer{name: family, thinking: true,
			oa: openai.NewClient(option.WithBaseURL(d.url+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0)),
			an: anthropic.NewClient(aoption.WithBaseURL(d.url+"/"), aoption.WithAPIKey("unused"), aoption.WithMaxRetries(0), aoption.WithJSONSet("temperature", 0))})
	}
	h := newHarness(t, func(c *harnessConfig) { c.format = Qwen35(qwenTemplate(t)) })
	out = append(out, formatServer{name: "qwen3.5", oa: h.client, an: h.anthropic(aoption.WithJSONSet("temperature", 0)), stream: true})
	return out
}

// TestConstrainedAPIsPerFormat: with every chat format that has a tool
// grammar, the Responses and Messages APIs honour a forced tool_choice
// (the reply is function_call items / tool_use blocks of the tool asked
// for, one with parallel calls off, whose arguments validate against its
// schema, the format's parser having read them back from its own markup),
// structured output (the text validates against the schema) and strict
// tools with tool_choice auto (any call validates), thinking or not.
// Greedy: each reply is deterministic.
func TestConstrainedAPIsPerFormat(t *testing.T) {
	vals := forcedToolVals(t)
	person := schemaValidator(t, personSchema)
	rtools := []responses.ToolUnionParam{
		{OfFunction: &responses.FunctionToolParam{Name: "get_weather", Parameters: schemaMap(t, weatherParams)}},
		responses.ToolParamOfFunction("find_psalm", schemaMap(t, psalmParams), false),
	}
	atools := []anthropic.ToolUnionParam{
		{OfTool: &anthropic.ToolParam{Name: "get_weather", InputSchema: anthropicInputSchema(t, weatherParams), Strict: anthropic.Bool(true)}},
		{OfTool: &anthropic.ToolParam{Name: "find_psalm", InputSchema: anthropicInputSchema(t, psalmParams)}},
	}
	input := responses.ResponseNewParamsInputUnion{OfString: openai.String("What is the weather in Jerusalem?")}
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Jerusalem?"))}
	for _, fs := range toolGrammarServers(t) {
		for _, thinking := range []bool{false, true} {
			if thinking && !fs.thinking {
				continue
			}
			what := fmt.Sprintf("%s, thinking %v", fs.name, thinking)
			var reasoning shared.ReasoningParam
			thinkingCfg := anthropic.ThinkingConfigParamUnion{OfDisabled: &anthropic.ThinkingConfigDisabledParam{}}
			if thinking {
				reasoning.Effort = shared.ReasoningEffortHigh
				thinkingCfg = anthropic.ThinkingConfigParamUnion{OfAdaptive: &anthropic.ThinkingConfigAdaptiveParam{}}
			}
			ac := fs.an
			newMessage := func(p anthropic.MessageNewParams) []*anthropic.Message {
				t.Helper()
				p.Model, p.MaxTokens, p.Messages, p.Thinking = "strata-test", 600, msgs, thinkingCfg
				m, err := ac.Messages.New(context.Background(), p)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				out := []*anthropic.Message{m}
				if fs.stream {
					out = append(out, streamAnthropic(t, ac, p, nil))
				}
				return out
			}
			newResponse := func(p responses.ResponseNewParams) *responses.Response {
				t.Helper()
				p.Model, p.MaxOutputTokens, p.Temperature, p.Reasoning = "strata-test", openai.Int(600), openai.Float(0), reasoning
				if !p.Input.OfString.Valid() {
					p.Input = input
				}
				r, err := fs.oa.Responses.New(context.Background(), p)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				return r
			}

			// Responses: tool_choice required (one call) and a named function.
			for _, tc := range []struct {
				choice responses.ResponseNewParamsToolChoiceUnion
				want   string
			}{
				{responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsRequired)}, ""},
				{responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: "find_psalm"}}, "find_psalm"},
			} {
				r := newResponse(responses.ResponseNewParams{Tools: rtools, ToolChoice: tc.choice, ParallelToolCalls: openai.Bool(false)})
				calls := responsesFunctionCalls(t, what, r)
				if r.Status != "completed" || len(calls) != 1 || r.OutputText() != "" {
					t.Fatalf("%s, responses, tool_choice %q: status %q, %d calls, text %q", what, tc.want, r.Status, len(calls), r.OutputText())
				}
				c := calls[0]
				if v := vals[c.Name]; v == nil || (tc.want != "" && c.Name != tc.want) {
					t.Fatalf("%s, responses: called %q", what, c.Name)
				}
				mustValidate(t, vals[c.Name], what+", responses, arguments of "+c.Name, c.Arguments.OfString)
				t.Logf("%s, responses: %s(%s)", what, c.Name, c.Arguments.OfString)
			}
			// Responses: text.format json_schema.
			r := newResponse(responses.ResponseNewParams{Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Who was Moses?")},
				Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{
					Name: "person", Schema: schemaMap(t, personSchema), Strict: openai.Bool(true)}}}})
			if r.Status != "completed" {
				t.Fatalf("%s, responses, json_schema: status %q (%q)", what, r.Status, r.OutputText())
			}
			mustValidate(t, person, what+", responses, output text", r.OutputText())
			t.Logf("%s, responses: %s", what, r.OutputText())
			// Responses: strict tools (the default), tool_choice auto.
			r = newResponse(responses.ResponseNewParams{Tools: rtools})
			if r.Status != "completed" && r.Status != "incomplete" {
				t.Fatalf("%s, responses, strict auto: status %q", what, r.Status)
			}
			for _, c := range responsesFunctionCalls(t, what, r) {
				if c.Name == "get_weather" {
					mustValidate(t, vals[c.Name], what+", responses, strict auto, arguments", c.Arguments.OfString)
				}
			}

			// Messages: tool_choice tool and any with disable_parallel_tool_use.
			for _, tc := range []struct {
				choice anthropic.ToolChoiceUnionParam
				want   string
			}{
				{anthropic.ToolChoiceUnionParam{OfTool: &anthropic.ToolChoiceToolParam{Name: "get_weather"}}, "get_weather"},
				{anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{DisableParallelToolUse: anthropic.Bool(true)}}, ""},
			} {
				for i, m := range newMessage(anthropic.MessageNewParams{Tools: atools, ToolChoice: tc.choice}) {
					var uses []anthropic.ContentBlockUnion
					for _, b := range m.Content {
						switch b.Type {
						case "tool_use":
							uses = append(uses, b)
						case "thinking":
						default:
							t.Fatalf("%s, messages (%d): block %s", what, i, b.RawJSON())
						}
					}
					if m.StopReason != "tool_use" || len(uses) != 1 {
						t.Fatalf("%s, messages (%d): stop %q, content %s", what, i, m.StopReason, m.RawJSON())
					}
					b := uses[0]
					if v := vals[b.Name]; v == nil || (tc.want != "" && b.Name != tc.want) {
						t.Fatalf("%s, messages: called %q", what, b.Name)
					}
					mustValidate(t, vals[b.Name], what+", messages, input of "+b.Name, string(b.Input))
					t.Logf("%s, messages (%d): %s(%s)", what, i, b.Name, b.Input)
				}
			}
			// Messages: output_config.format.
			for i, m := range newMessage(anthropic.MessageNewParams{OutputConfig: anthropic.OutputConfigParam{Format: anthropic.JSONOutputFormatParam{Schema: schemaMap(t, personSchema)}}}) {
				var text []string
				for _, b := range m.Content {
					if b.Type == "text" {
						text = append(text, b.Text)
					} else if b.Type != "thinking" {
						t.Fatalf("%s, messages, output_config (%d): block %s", what, i, b.RawJSON())
					}
				}
				if m.StopReason != "end_turn" || len(text) != 1 {
					t.Fatalf("%s, messages, output_config (%d): stop %q, content %s", what, i, m.StopReason, m.RawJSON())
				}
				mustValidate(t, person, what+", messages, text", text[0])
			}
		}
	}
}

// TestForcedToolsWithoutToolGrammar: with a chat format that has no tool
// grammar (Gemma 4, a plain Jinja template) a forced tool call through any
// API is a 400 on tool_choice naming the format, before the engine; strict
// tools with tool_choice auto and structured output are served (nothing
// constrains tool calls there: the format's parser reads what the model
// writes).
func TestForcedToolsWithoutToolGrammar(t *testing.T) {
	gemma, _ := gemma4Harness(t, func(dir string, _ *tokenizer.Tokenizer) model.Model {
		m, err := gemma4.Load(dir, cpu.New(0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	})
	jinja := newHarness(t, func(c *harnessConfig) { c.format = Jinja(qwenTemplate(t)) })
	const (
		params  = `{"type":"object","properties":{"city":{"type":"string","maxLength":8}},"required":["city"]}`
		ctools  = `"tools":[{"type":"function","function":{"name":"get_weather","parameters":` + params + `}}]`
		rtools  = `"tools":[{"type":"function","name":"get_weather","parameters":` + params + `}]`
		atools  = `"tools":[{"name":"get_weather","input_schema":` + params + `,"strict":true}]`
		chatReq = `{"model":"strata-test","max_tokens":4,"messages":[{"role":"user","content":"Weather?"}],` + ctools
		resp    = `{"model":"strata-test","max_output_tokens":4,"input":"Weather?",` + rtools
		message = `{"model":"strata-test","max_tokens":4,"messages":[{"role":"user","content":"Weather?"}],` + atools
	)
	for _, tc := range []struct {
		name, path, body string
		status           int
		mention          string
	}{
		{"chat, required", "/v1/chat/completions", chatReq + `,"tool_choice":"required"}`, 400, "forcing a tool call"},
		{"chat, named", "/v1/chat/completions", chatReq + `,"tool_choice":{"type":"function","function":{"name":"get_weather"}}}`, 400, `forcing a call of \"get_weather\"`},
		{"responses, required", "/v1/responses", resp + `,"tool_choice":"required"}`, 400, "forcing a tool call"},
		{"responses, named", "/v1/responses", resp + `,"tool_choice":{"type":"function","name":"get_weather"}}`, 400, `forcing a call of \"get_weather\"`},
		{"messages, any", "/v1/messages", message + `,"tool_choice":{"type":"any"}}`, 400, "forcing a tool call"},
		{"messages, tool", "/v1/messages", message + `,"tool_choice":{"type":"tool","name":"get_weather"}}`, 400, `forcing a call of \"get_weather\"`},
		{"chat, strict, auto", "/v1/chat/completions", `{"model":"strata-test","max_tokens":4,"messages":[{"role":"user","content":"Weather?"}],"tools":[{"type":"function","function":{"name":"get_weather","strict":true,"parameters":` + params + `}}]}`, 200, ""},
		{"responses, strict, auto", "/v1/responses", resp + `}`, 200, ""},
		{"messages, strict, auto", "/v1/messages", message + `}`, 200, ""},
		{"responses, json_schema", "/v1/responses", `{"model":"strata-test","max_output_tokens":4,"input":"Weather?","text":{"format":{"type":"json_schema","name":"w","schema":` + params + `}}}`, 200, ""},
	} {
		for _, f := range []struct {
			name string
			h    *harness
		}{{"gemma4", gemma}, {"jinja", jinja}} {
			status, body := f.h.post(tc.path, tc.body)
			if status != tc.status {
				t.Errorf("%s, %s: status %d %s; want %d", f.name, tc.name, status, body, tc.status)
				continue
			}
			if tc.status == 200 {
				continue
			}
			var e struct {
				Error struct{ Type, Message, Param string }
			}
			if json.Unmarshal(body, &e) != nil || e.Error.Type != "invalid_request_error" ||
				!strings.Contains(string(body), tc.mention) || !strings.Contains(e.Error.Message, "the "+f.name+" chat format") {
				t.Errorf("%s, %s: %s; want an invalid_request_error mentioning %s and the format", f.name, tc.name, body, tc.mention)
			}
			if tc.path != "/v1/messages" && e.Error.Param != "tool_choice" {
				t.Errorf("%s, %s: param %q, want tool_choice", f.name, tc.name, e.Error.Param)
			}
		}
	}
	gemma.waitIdle()
	jinja.waitIdle()
}
