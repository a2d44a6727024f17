package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-inference/strata/grammar"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/tokenizer"
	"github.com/strata-inference/strata/tokenizer/chat"
)

// testdataTemplate is a chat template of tokenizer/chat/testdata.
func testdataTemplate(t *testing.T, name string) *chat.Template {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "tokenizer", "chat", "testdata", name, "chat_template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tm, err := chat.NewTemplate(string(src))
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// TestStructuredReasoningFormats: for every chat format whose replies may
// carry reasoning ending at a marker (Gemma 4's special <channel|>,
// MiniMax's </think>, Qwen3.5's </think>) and for Kimi's, whose replies
// carry none, a json_schema reply grammar, with thinking and without,
// accepts the reply the model would write (reasoning, then the answer)
// and what it accepts the format's parser reads into content that
// validates against the schema; answers the parser would read as
// reasoning are refused.
func TestStructuredReasoningFormats(t *testing.T) {
	const schema = `{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city","days"],"additionalProperties":false}`
	const answer = `{"city":"Paris","days":2}`
	v := schemaValidator(t, schema)
	gemma, err := Gemma4(testdataTemplate(t, "gemma4"))
	if err != nil {
		t.Fatal(err)
	}
	// A Gemma 4 template whose generation prompt opens the thought
	// channel in thinking mode.
	gemmaOpen := gemma4Format{inThought: map[bool]bool{true: true}}
	type reply struct {
		text, reasoning string
		ok              bool
	}
	for _, tc := range []struct {
		name     string
		f        ChatFormat
		thinking bool
		replies  []reply
	}{
		{"gemma4", gemma, false, []reply{{answer, "", true}, {"<|channel>thought\nhmm<channel|>" + answer, "", false}}},
		{"gemma4", gemma, true, []reply{
			{answer, "", true},
			{"<|channel>thought\nThe user wants JSON. {not yet}<channel|>\n" + answer, "The user wants JSON. {not yet}", true},
			{"<|channel>thought\nhmm<turn|><channel|>" + answer, "", false}, // <turn|> would end the reply
			{"<|channel>thought\nhmm", "", false},
		}},
		{"gemma4 (prompt opens the thought)", gemmaOpen, true, []reply{
			{"Let me see.<channel|>" + answer, "Let me see.", true},
			{"<channel|>" + answer, "", true},
			{answer, "", false}, // the parser would read it as reasoning
		}},
		{"minimax", MiniMax(testdataTemplate(t, "minimax-m3")), false, []reply{
			{"The user wants Paris.\n</think>\n\n" + answer, "The user wants Paris.", true},
			{answer, "", false}, // the prompt opened <think>: it would be reasoning
		}},
		{"minimax", MiniMax(testdataTemplate(t, "minimax-m3")), true, []reply{
			{"Think [e~ think.</think>" + answer, "Think [e~ think.", true},
			{"hmm[e~[</think>" + answer, "", false},
			{answer, "", false},
		}},
		{"qwen3.5", Qwen35(qwenTemplate(t)), false, []reply{{answer, "", true}, {"x</think>\n\n" + answer, "", false}}},
		{"qwen3.5", Qwen35(qwenTemplate(t)), true, []reply{{"Paris it is.\n</think>\n\n" + answer, "Paris it is.", true}, {answer, "", false}}},
		{"kimi", Kimi(testdataTemplate(t, "kimi-linear")), false, []reply{{answer, "", true}}},
		{"kimi", Kimi(testdataTemplate(t, "kimi-linear")), true, []reply{{answer, "", true}, {"<think>x</think>" + answer, "", false}}},
	} {
		opt := ChatOptions{Thinking: tc.thinking}
		s := &Server{format: tc.f}
		for _, api := range []*structured{
			{format: "json_schema", schema: json.RawMessage(schema), formatParam: "response_format", schemaParam: "response_format.json_schema.schema"},
			{format: "json_schema", schema: json.RawMessage(schema), formatParam: "text.format", schemaParam: "text.format.schema"},
			{format: "json_schema", schema: json.RawMessage(schema), formatParam: "output_config.format", schemaParam: "output_config.format.schema"},
		} {
			x, aerr := s.replyGrammar(api, nil, opt, true)
			if aerr != nil {
				t.Fatalf("%s, thinking %v: %v", tc.name, tc.thinking, aerr)
			}
			g, err := grammar.Compile(x)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range tc.replies {
				if ok, _ := g.Recognize([]byte(r.text)); ok != r.ok {
					t.Errorf("%s, thinking %v, %s: %q accepted %v, want %v", tc.name, tc.thinking, api.formatParam, r.text, ok, r.ok)
				}
				if !r.ok {
					continue
				}
				// The reply as it streams, a few bytes at a time.
				p := replyParser(tc.f, opt, nil)
				var reasoning, content strings.Builder
				for i := 0; i < len(r.text); i += 3 {
					dr, dc := p.Add(r.text[i:min(i+3, len(r.text))])
					reasoning.WriteString(dr)
					content.WriteString(dc)
				}
				dr, dc, calls, err := p.Finish()
				reasoning.WriteString(dr)
				content.WriteString(dc)
				if err != nil || len(calls) != 0 || reasoning.String() != r.reasoning {
					t.Errorf("%s, thinking %v: %q read as reasoning %q, calls %v, err %v; want reasoning %q", tc.name, tc.thinking, r.text, reasoning.String(), calls, err, r.reasoning)
				}
				mustValidate(t, v, tc.name+" content", content.String())
			}
		}
	}
}

// TestGemma4StructuredThinkingEndToEnd: on the synthetic Gemma 4 (its
// tokenizer, where <|channel> and <channel|> are special tokens, and its
// template), a model that thinks in the thought channel and then answers
// in JSON is served under response_format, text.format and
// output_config.format, with thinking and without: the constraint lets
// every token of the reply through (the special channel markers
// included), the reasoning comes back as reasoning and the content
// validates against the schema.
func TestGemma4StructuredThinkingEndToEnd(t *testing.T) {
	const schema = `{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city","days"],"additionalProperties":false}`
	const answer = `{"city":"Paris","days":2}`
	const thought = "The user wants the weather as JSON."
	v := schemaValidator(t, schema)
	h, _ := gemma4Harness(t, func(_ string, tk *tokenizer.Tokenizer) model.Model {
		think := tk.Encode("<|turn>model\n", true)
		plain := tk.Encode("<|turn>model\n<|channel>thought\n<channel|>", true)
		thinking := tk.Encode("<|channel>thought\n"+thought+"<channel|>"+answer+"<turn|>", true)
		direct := tk.Encode(answer+"<turn|>", true)
		return &scriptedModel{vocab: tk.VocabSize(), script: func(hist []int32) int32 {
			for i := len(hist) - len(plain); i >= 0; i-- {
				if slices.Equal(hist[i:i+len(plain)], plain) {
					return replyScript(plain, direct, 1)(hist)
				}
				if slices.Equal(hist[i:i+len(think)], think) {
					break
				}
			}
			return replyScript(think, thinking, 1)(hist)
		}}
	})
	var sc any
	if err := json.Unmarshal([]byte(schema), &sc); err != nil {
		t.Fatal(err)
	}
	user := []map[string]any{{"role": "user", "content": "Weather in Paris as JSON?"}}
	for _, thinkingOn := range []bool{false, true} {
		wantReasoning := ""
		if thinkingOn {
			wantReasoning = thought
		}
		// Chat completions: response_format.
		req := map[string]any{"model": "strata-test", "messages": user, "max_tokens": 64,
			"response_format":      map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "w", "schema": sc}},
			"chat_template_kwargs": map[string]any{"enable_thinking": thinkingOn}}
		status, body := h.post("/v1/chat/completions", req)
		var cr chatReply
		if status != 200 || json.Unmarshal(body, &cr) != nil || len(cr.Choices) != 1 || cr.Choices[0].Message.Content == nil {
			t.Fatalf("chat, thinking %v: status %d %s", thinkingOn, status, body)
		}
		if c := cr.Choices[0]; c.FinishReason != "stop" || c.Message.ReasoningContent != wantReasoning {
			t.Errorf("chat, thinking %v: %s", thinkingOn, body)
		}
		mustValidate(t, v, "chat content", *cr.Choices[0].Message.Content)

		// Responses: text.format.
		rreq := map[string]any{"model": "strata-test", "input": "Weather in Paris as JSON?", "max_output_tokens": 64,
			"text": map[string]any{"format": map[string]any{"type": "json_schema", "name": "w", "schema": sc}}}
		if thinkingOn {
			rreq["reasoning"] = map[string]any{"effort": "medium"}
		}
		status, body = h.post("/v1/responses", rreq)
		var rr struct {
			Status string `json:"status"`
			Output []struct {
				Type    string `json:"type"`
				Content []struct {
					Type, Text string
				} `json:"content"`
				Summary []struct{ Text string } `json:"summary"`
			} `json:"output"`
		}
		if status != 200 || json.Unmarshal(body, &rr) != nil || rr.Status != "completed" {
			t.Fatalf("responses, thinking %v: status %d %s", thinkingOn, status, body)
		}
		var text, reasoning string
		for _, it := range rr.Output {
			for _, c := range it.Content {
				switch c.Type {
				case "output_text":
					text += c.Text
				case "reasoning_text":
					reasoning += c.Text
				}
			}
			for _, s := range it.Summary {
				reasoning += s.Text
			}
		}
		if reasoning != wantReasoning {
			t.Errorf("responses, thinking %v: reasoning %q in %s", thinkingOn, reasoning, body)
		}
		mustValidate(t, v, "responses output_text", text)

		// Messages: output_config.format.
		mreq := map[string]any{"model": "strata-test", "messages": user, "max_tokens": 2048,
			"output_config": map[string]any{"format": map[string]any{"type": "json_schema", "schema": sc}}}
		if thinkingOn {
			mreq["thinking"] = map[string]any{"type": "enabled", "budget_tokens": 1024}
		}
		status, body = h.post("/v1/messages", mreq)
		var mr struct {
			StopReason string `json:"stop_reason"`
			Content    []struct {
				Type, Text, Thinking string
			} `json:"content"`
		}
		if status != 200 || json.Unmarshal(body, &mr) != nil || mr.StopReason != "end_turn" {
			t.Fatalf("messages, thinking %v: status %d %s", thinkingOn, status, body)
		}
		text, reasoning = "", ""
		for _, b := range mr.Content {
			text += b.Text
			reasoning += b.Thinking
		}
		if reasoning != wantReasoning {
			t.Errorf("messages, thinking %v: thinking %q in %s", thinkingOn, reasoning, body)
		}
		mustValidate(t, v, "messages text", text)
	}
	h.waitIdle()
}
