package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-inference/strata/grammar"
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
