package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/strata-inference/strata/grammar"
	"github.com/strata-inference/strata/tokenizer/chat"
)

// schemaValidator compiles a schema with an independent JSON Schema
// implementation.
func schemaValidator(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustValidate(t *testing.T, s *jsonschema.Schema, what, doc string) {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		t.Fatalf("%s: %q is not JSON: %v", what, doc, err)
	}
	if err := s.Validate(inst); err != nil {
		t.Fatalf("%s: %q does not validate: %v", what, doc, err)
	}
}

func schemaMap(t *testing.T, schema string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(schema), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// A schema whose documents are all short, so that even a model that knows
// nothing of JSON ends them within the token budget.
const personSchema = `{"type":"object","properties":{
	"name":{"type":"string","maxLength":16},
	"age":{"type":"integer","minimum":0,"maximum":130},
	"tags":{"type":"array","items":{"type":"string","maxLength":6},"maxItems":2},
	"role":{"enum":["king","prophet","scribe"]},
	"score":{"type":["number","null"],"minimum":-1,"maximum":1}
},"required":["name","age","role"],"additionalProperties":false}`

// TestStructuredJSONSchema: response_format json_schema through the
// OpenAI Go SDK, greedy and sampled, streaming and not, several choices:
// the shipped model's replies (garbage text otherwise) parse and validate
// against the schema, and end because the document is complete.
func TestStructuredJSONSchema(t *testing.T) {
	h := newHarness(t)
	val := schemaValidator(t, personSchema)
	params := openai.ChatCompletionNewParams{
		Model:     "strata-test",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Who was Moses? Answer in JSON.")},
		MaxTokens: openai.Int(600),
		N:         openai.Int(2),
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "person", Schema: schemaMap(t, personSchema), Strict: openai.Bool(true)},
		}},
	}
	for _, temp := range []float64{0, 1} {
		params.Temperature = openai.Float(temp)
		params.Seed = openai.Int(int64(10 + temp))
		resp, err := h.client.Chat.Completions.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Choices) != 2 {
			t.Fatalf("%d choices, want 2", len(resp.Choices))
		}
		for _, c := range resp.Choices {
			if c.FinishReason != "stop" {
				t.Fatalf("temperature %g: finish %q, want stop (content %q)", temp, c.FinishReason, c.Message.Content)
			}
			mustValidate(t, val, "reply", c.Message.Content)
			t.Logf("temperature %g: %s", temp, c.Message.Content)
		}
		if temp != 0 {
			continue
		}
		_, acc := streamChat(t, h, params)
		for _, c := range acc.Choices {
			if c.FinishReason != "stop" {
				t.Fatalf("streamed, temperature %g: finish %q (content %q)", temp, c.FinishReason, c.Message.Content)
			}
			mustValidate(t, val, "streamed reply", c.Message.Content)
		}
		if acc.Choices[0].Message.Content != resp.Choices[0].Message.Content {
			t.Errorf("greedy: streamed %q, not streamed %q", acc.Choices[0].Message.Content, resp.Choices[0].Message.Content)
		}
	}
	h.waitIdle()
}

// TestStructuredJSONObject: response_format json_object gives a JSON
// object, and /v1/completions honours response_format too.
func TestStructuredJSONObject(t *testing.T) {
	h := newHarness(t)
	for seed := range 2 {
		resp, err := h.client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model:          "strata-test",
			Messages:       []openai.ChatCompletionMessageParamUnion{openai.UserMessage("And God said")},
			MaxTokens:      openai.Int(300),
			Temperature:    openai.Float(0.7),
			Seed:           openai.Int(int64(seed)),
			ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}},
		})
		if err != nil {
			t.Fatal(err)
		}
		c := resp.Choices[0]
		var obj map[string]any
		switch c.FinishReason {
		case "stop":
			if err := json.Unmarshal([]byte(c.Message.Content), &obj); err != nil {
				t.Fatalf("seed %d: %q is not a JSON object: %v", seed, c.Message.Content, err)
			}
		case "length":
			// An unbounded object can outlast any budget; what there is must
			// still be the start of one.
			if !strings.HasPrefix(c.Message.Content, "{") {
				t.Fatalf("seed %d: cut reply %q does not start an object", seed, c.Message.Content)
			}
		default:
			t.Fatalf("seed %d: finish %q", seed, c.FinishReason)
		}
		t.Logf("seed %d (%s): %.200s", seed, c.FinishReason, c.Message.Content)
	}

	schema := `{"type":"array","items":{"type":"integer","minimum":1,"maximum":12},"minItems":1,"maxItems":5}`
	status, body := h.post("/v1/completions", map[string]any{
		"model": "strata-test", "prompt": "The twelve tribes:", "max_tokens": 60, "temperature": 0,
		"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "tribes", "schema": json.RawMessage(schema)}},
	})
	if status != 200 {
		t.Fatalf("completions: status %d: %s", status, body)
	}
	var cr struct {
		Choices []struct {
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &cr); err != nil {
		t.Fatal(err)
	}
	if cr.Choices[0].FinishReason != "stop" {
		t.Fatalf("completions: finish %q (%q)", cr.Choices[0].FinishReason, cr.Choices[0].Text)
	}
	mustValidate(t, schemaValidator(t, schema), "completion", cr.Choices[0].Text)
	h.waitIdle()
}

var weatherParams = `{"type":"object","properties":{
	"city":{"type":"string","maxLength":12},
	"days":{"type":"integer","minimum":1,"maximum":7},
	"units":{"enum":["celsius","fahrenheit"]}
},"required":["city","units"]}`

var psalmParams = `{"type":"object","properties":{
	"number":{"type":"integer","minimum":1,"maximum":150},
	"verses":{"type":"array","items":{"type":"integer","minimum":1,"maximum":176},"maxItems":3}
},"required":["number"]}`

// TestStructuredToolChoice: tool_choice "required" and a named function,
// through the OpenAI Go SDK, streaming and not: the shipped model's reply
// is a tool call of one of the tools (the named one), whose arguments
// validate against its parameter schema.
func TestStructuredToolChoice(t *testing.T) {
	h := newHarness(t)
	vals := map[string]*jsonschema.Schema{"get_weather": schemaValidator(t, weatherParams), "find_psalm": schemaValidator(t, psalmParams)}
	tools := []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather", Description: openai.String("Weather in a city"), Parameters: schemaMap(t, weatherParams)}),
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "find_psalm", Parameters: schemaMap(t, psalmParams)}),
	}
	for _, tc := range []struct {
		name   string
		choice openai.ChatCompletionToolChoiceOptionUnionParam
		want   string // the function that must be called ("": either)
	}{
		{"required", openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}, ""},
		{"named", openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "find_psalm"}), "find_psalm"},
	} {
		for k, temp := range []float64{0, 0.9} {
			params := openai.ChatCompletionNewParams{
				Model:       "strata-test",
				Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Jerusalem?")},
				MaxTokens:   openai.Int(400),
				Temperature: openai.Float(temp),
				Seed:        openai.Int(5),
				Tools:       tools,
				ToolChoice:  tc.choice,
			}
			// One of each pair streamed.
			var msg openai.ChatCompletionChoice
			if (k == 0) == (tc.want == "") {
				resp, err := h.client.Chat.Completions.New(context.Background(), params)
				if err != nil {
					t.Fatal(err)
				}
				msg = resp.Choices[0]
			} else {
				_, acc := streamChat(t, h, params)
				msg = acc.Choices[0]
			}
			{
				i := k
				if msg.FinishReason != "tool_calls" || len(msg.Message.ToolCalls) == 0 {
					t.Fatalf("%s, temperature %g, reply %d: finish %q, %d calls, content %q", tc.name, temp, i, msg.FinishReason, len(msg.Message.ToolCalls), msg.Message.Content)
				}
				if msg.Message.Content != "" {
					t.Errorf("%s: content %q beside the tool calls", tc.name, msg.Message.Content)
				}
				for _, call := range msg.Message.ToolCalls {
					v := vals[call.Function.Name]
					if v == nil || (tc.want != "" && call.Function.Name != tc.want) {
						t.Fatalf("%s: called %q", tc.name, call.Function.Name)
					}
					mustValidate(t, v, tc.name+" arguments of "+call.Function.Name, call.Function.Arguments)
				}
				if tc.want != "" && len(msg.Message.ToolCalls) != 1 {
					t.Errorf("%s: %d calls, want exactly one", tc.name, len(msg.Message.ToolCalls))
				}
				if i == 0 {
					t.Logf("%s, temperature %g: %s(%s)", tc.name, temp, msg.Message.ToolCalls[0].Function.Name, msg.Message.ToolCalls[0].Function.Arguments)
				}
			}
		}
	}
	h.waitIdle()
}

// TestStructuredThinking: in DeepSeek-V4's thinking mode the reasoning is
// free up to </think> and the answer after it is constrained; the reply
// parser reads the answer as content.
func TestStructuredThinking(t *testing.T) {
	s := &Server{format: DeepSeekV4()}
	x, aerr := s.replyGrammar(&structured{format: "json_object"}, nil, ChatOptions{Thinking: true}, true)
	if aerr != nil {
		t.Fatal(aerr)
	}
	g, err := grammar.Compile(x)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		reply string
		ok    bool
	}{
		{"Let me think. {not json} </thin</think>{\"a\":1}", true},
		{"</think>{}", true},
		{"{\"a\":1}", false},                    // no reasoning end
		{"hmm</think>{\"a\":1}</think>", false}, // nothing after the answer
		{"hmm</think>[1]", false},               // json_object: an object
	} {
		if ok, _ := g.Recognize([]byte(tc.reply)); ok != tc.ok {
			t.Errorf("%q: accepted %v, want %v", tc.reply, ok, tc.ok)
		}
		if tc.ok {
			p, err := chat.ParseDeepSeekV4(tc.reply, true)
			if err != nil || !json.Valid([]byte(p.Content)) {
				t.Errorf("%q: parsed content %q (%v) is not JSON", tc.reply, p.Content, err)
			}
		}
	}
	// Without thinking there is no prefix; with the Jinja format forced
	// tool calls are refused.
	if _, aerr := (&Server{format: Jinja(nil)}).replyGrammar(&structured{calls: "required", parallel: true}, nil, ChatOptions{}, true); aerr == nil {
		t.Error("forced tool calls accepted for the Jinja format")
	}
}

// FuzzDecodeStructured: the response_format and tool_choice decoders
// return a result or a 400 for any input, never panic, and what they
// accept is consistent.
func FuzzDecodeStructured(f *testing.F) {
	f.Add([]byte(`{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string"}}}`), []byte(`"required"`))
	f.Add([]byte(`{"type":"json_object"}`), []byte(`{"type":"function","function":{"name":"f"}}`))
	f.Add([]byte(`{"type":"text"}`), []byte(`"auto"`))
	f.Add([]byte(`null`), []byte(`{"type":"function"}`))
	tools := []chat.Tool{{Type: "function", Function: chat.ToolFunction{Name: "f"}}}
	f.Fuzz(func(t *testing.T, rf, tc []byte) {
		var st structured
		if aerr := decodeResponseFormat(rf, &st); aerr != nil {
			if aerr.Status != 400 || aerr.Param == "" {
				t.Fatalf("response_format %q: %+v", rf, aerr)
			}
		} else if st.format != "" && st.format != "json_object" && st.format != "json_schema" {
			t.Fatalf("response_format %q: format %q", rf, st.format)
		}
		got, aerr := decodeToolChoice(tc, tools, nil, &st)
		if aerr != nil {
			if aerr.Status != 400 || aerr.Param == "" {
				t.Fatalf("tool_choice %q: %+v", tc, aerr)
			}
			return
		}
		if st.calls == "function" && st.name != "f" || (st.calls != "" && len(got) == 0) {
			t.Fatalf("tool_choice %q: %+v with tools %v", tc, st, got)
		}
	})
}

// TestStructuredErrorNamesKeyword: a schema keyword the compiler does not
// support is a 400 whose message names it (and the tool, for parameters).
func TestStructuredErrorNamesKeyword(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		body any
		want []string
	}{
		{map[string]any{"model": "strata-test", "messages": []map[string]string{{"role": "user", "content": "hi"}},
			"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x",
				"schema": map[string]any{"type": "object", "properties": map[string]any{"when": map[string]any{"type": "string", "pattern": `\bx`}}}}}},
			[]string{"pattern"}},
		{map[string]any{"model": "strata-test", "messages": []map[string]string{{"role": "user", "content": "hi"}},
			"tools":       []any{map[string]any{"type": "function", "function": map[string]any{"name": "lookup", "parameters": map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "array", "uniqueItems": true}}}}}},
			"tool_choice": "required"},
			[]string{"uniqueItems", "lookup"}},
	} {
		status, body := h.post("/v1/chat/completions", tc.body)
		if status != 400 {
			t.Fatalf("status %d: %s", status, body)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(body), w) {
				t.Errorf("error %s does not name %q", body, w)
			}
		}
	}
}

// TestStructuredToolGrammar: parallel_tool_calls false allows one call;
// with tools and tool_choice "auto", a json_object response_format allows
// the object or tool calls instead.
func TestStructuredToolGrammar(t *testing.T) {
	s := &Server{format: DeepSeekV4()}
	tools := []chat.Tool{{Type: "function", Function: chat.ToolFunction{Name: "f", Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)}}}
	call := "<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"n\" string=\"false\">3</｜DSML｜parameter>\n</｜DSML｜invoke>"
	one := "\n\n<｜DSML｜tool_calls>\n" + call + "\n</｜DSML｜tool_calls>"
	two := "\n\n<｜DSML｜tool_calls>\n" + call + "\n" + call + "\n</｜DSML｜tool_calls>"
	for _, tc := range []struct {
		st      structured
		replies map[string]bool
	}{
		{structured{calls: "required", parallel: true}, map[string]bool{one: true, two: true, `{}`: false}},
		{structured{calls: "required", parallel: false}, map[string]bool{one: true, two: false}},
		{structured{calls: "function", name: "f", parallel: true}, map[string]bool{one: true, two: false}},
		{structured{format: "json_object", parallel: true}, map[string]bool{one: true, two: true, `{"a":1}`: true, `[1]`: false}},
	} {
		x, aerr := s.replyGrammar(&tc.st, tools, ChatOptions{}, true)
		if aerr != nil {
			t.Fatal(aerr)
		}
		g, err := grammar.Compile(x)
		if err != nil {
			t.Fatal(err)
		}
		for reply, want := range tc.replies {
			if ok, _ := g.Recognize([]byte(reply)); ok != want {
				t.Errorf("%+v: %q accepted %v, want %v", tc.st, reply, ok, want)
			}
			if want && strings.Contains(reply, "DSML") {
				p, err := chat.ParseDeepSeekV4(reply, false)
				if err != nil || len(p.ToolCalls) == 0 || p.ToolCalls[0].Arguments != `{"n": 3}` {
					t.Errorf("%q parsed as %+v (%v)", reply, p, err)
				}
			}
		}
	}
}
