package server

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/strata-inference/strata/tokenizer/chat"
)

// checkRejection is what every decoder's refusal must be: a 400 with a
// message and a type, whose body encodes in both APIs' error shapes.
func checkRejection(t *testing.T, aerr *apiError) {
	t.Helper()
	if aerr.Status != 400 || aerr.Message == "" || aerr.Type == "" || !utf8.ValidString(aerr.Message) {
		t.Fatalf("rejection %+v", aerr)
	}
	if _, err := json.Marshal(aerr.body()); err != nil {
		t.Fatalf("error body does not encode: %v", err)
	}
	if _, err := json.Marshal(anthropicErrorBody(aerr)); err != nil {
		t.Fatalf("Anthropic error body does not encode: %v", err)
	}
}

// checkConversation holds for any conversation a decoder accepts: known
// roles, tool calls with names and JSON-object arguments, and a rendering
// that returns (a prompt or an error, never a panic).
func checkConversation(t *testing.T, msgs []chat.Message, tools []chat.Tool, opt ChatOptions) {
	t.Helper()
	for _, m := range msgs {
		if !strings.Contains(" system developer user assistant tool ", " "+m.Role+" ") {
			t.Fatalf("role %q", m.Role)
		}
		for _, c := range m.ToolCalls {
			if c.Name == "" || (strings.TrimSpace(c.Arguments) != "" && !isJSONObject(c.Arguments)) {
				t.Fatalf("tool call %+v", c)
			}
		}
	}
	DeepSeekV4().Render(msgs, tools, opt)
}

// FuzzDecodeMessagesRequest: the Messages API decoder never panics, its
// refusals are 400s, and what it accepts satisfies what the handler relies
// on: a model, max_tokens (unless counting), the sampling the engine
// accepts, Anthropic's temperature range, at most one system message and it
// first, a renderable conversation.
func FuzzDecodeMessagesRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","max_tokens":5,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"stop_sequences":["x"],"temperature":0.5,"top_k":3,"stream":true}`,
		`{"model":"m","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"strata1.aGk="},{"type":"tool_use","id":"t","name":"f","input":{"a":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"r"}],"is_error":true}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto","disable_parallel_tool_use":true}}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"pre"}]}`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`,
		`{"model":"m","max_tokens":5,"output_config":{"effort":"max"},"metadata":{"user_id":"u"},"messages":[]}`,
		`{`, `null`, `[]`, "\xef\xbb\xbf{}",
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, countOnly bool) {
		req, aerr := decodeMessagesRequest(data, countOnly)
		if aerr != nil {
			if req != nil {
				t.Fatal("a request with a rejection")
			}
			checkRejection(t, aerr)
			return
		}
		switch {
		case req.Model == "":
			t.Fatal("accepted without a model")
		case !countOnly && req.MaxTokens < 1:
			t.Fatalf("max tokens %d", req.MaxTokens)
		case req.N != 1 || req.Logprobs != -1:
			t.Fatalf("n %d logprobs %d", req.N, req.Logprobs)
		case !(req.Sampling.Temperature >= 0 && req.Sampling.Temperature <= 1):
			t.Fatalf("temperature %g", req.Sampling.Temperature)
		case len(req.Messages) == 0:
			t.Fatal("no messages")
		case req.Chat.ReasoningEffort != "" && !req.Chat.Thinking:
			t.Fatal("effort without thinking")
		case len(req.Stop) > maxStops:
			t.Fatalf("%d stops", len(req.Stop))
		}
		if err := req.Sampling.Validate(); err != nil {
			t.Fatalf("accepted sampling the engine refuses: %v", err)
		}
		for i, m := range req.Messages {
			if m.Role == chat.RoleSystem && i != 0 {
				t.Fatalf("a system message at %d", i)
			}
		}
		if last := req.Messages[len(req.Messages)-1]; req.Prefilled != (last.Role == chat.RoleAssistant) || (req.Prefilled && !last.WithoutEOS) {
			t.Fatalf("prefilled %v with last message %+v", req.Prefilled, last)
		}
		checkConversation(t, req.Messages, req.Tools, req.Chat)
	})
}

// FuzzDecodeResponsesRequest: likewise for the Responses API: input items
// become a renderable conversation, options are in range.
func FuzzDecodeResponsesRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","input":"hi"}`,
		`{"model":"m","instructions":"be brief","input":[{"role":"user","content":"a"},{"type":"message","role":"assistant","id":"msg_1","status":"completed","content":[{"type":"output_text","text":"b","annotations":[],"logprobs":[]}]}],"max_output_tokens":5,"stream":true,"store":false}`,
		`{"model":"m","input":[{"type":"reasoning","id":"rs","summary":[],"encrypted_content":"strata1.aGk="},{"type":"function_call","call_id":"c","name":"f","arguments":"{\"a\":1}"},{"type":"function_call_output","call_id":"c","output":"r"}],"tools":[{"type":"function","name":"f","parameters":{"type":"object"},"strict":false}],"parallel_tool_calls":false,"max_tool_calls":1}`,
		`{"model":"m","previous_response_id":"resp_x","input":[{"role":"user","content":[{"type":"input_text","text":"x"}]}],"reasoning":{"effort":"high","summary":"auto"},"include":["reasoning.encrypted_content"]}`,
		`{"model":"m","input":[{"type":"item_reference","id":"x"}]}`,
		`{"model":"m","input":"x","text":{"format":{"type":"json_object"}}}`,
		`{`, `[]`, `{"model":"m"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, aerr := decodeResponsesRequest(data, 320)
		if aerr != nil {
			if req != nil {
				t.Fatal("a request with a rejection")
			}
			checkRejection(t, aerr)
			return
		}
		switch {
		case req.Model == "":
			t.Fatal("accepted without a model")
		case len(req.Input) == 0 && req.PreviousID == "":
			t.Fatal("accepted without input")
		case req.MaxTokens < 0 || req.MaxToolCalls < 0:
			t.Fatalf("max tokens %d, max tool calls %d", req.MaxTokens, req.MaxToolCalls)
		case req.ToolChoice != "auto" && req.ToolChoice != "none":
			t.Fatalf("tool choice %q", req.ToolChoice)
		case req.ToolChoice == "none" && len(req.Tools) > 0:
			t.Fatal("tools with tool_choice none")
		case req.Chat.ReasoningEffort != "" && !req.Chat.Thinking:
			t.Fatal("effort without thinking")
		}
		if err := req.Sampling.Validate(); err != nil {
			t.Fatalf("accepted sampling the engine refuses: %v", err)
		}
		checkConversation(t, req.Input, req.Tools, req.Chat)
	})
}

// FuzzDecodeTokenize: /tokenize and /detokenize bodies decode or are
// refused with a 400; accepted ones hold a prompt or messages, and token
// ids in the vocabulary.
func FuzzDecodeTokenize(f *testing.F) {
	for _, s := range []string{
		`{"prompt":"hi"}`, `{"model":"m","prompt":"hi","add_special_tokens":false}`,
		`{"messages":[{"role":"user","content":"hi"}],"reasoning_effort":"high","return_token_strs":true}`,
		`{"tokens":[1,2,3]}`, `{"tokens":[],"skip_special_tokens":true}`, `{"tokens":[-1]}`, `{}`, `{"prompt":"a","messages":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if req, aerr := decodeTokenizeRequest(data); aerr != nil {
			checkRejection(t, aerr)
		} else if (req.Prompt == nil) == (req.Messages == nil) {
			t.Fatalf("accepted with prompt %v and %d messages", req.Prompt, len(req.Messages))
		} else if req.Messages != nil {
			checkConversation(t, req.Messages, req.Tools, req.Chat)
		}
		if _, ids, _, aerr := decodeDetokenizeRequest(data, 320); aerr != nil {
			checkRejection(t, aerr)
		} else {
			for _, id := range ids {
				if id < 0 || id >= 320 {
					t.Fatalf("token %d", id)
				}
			}
		}
	})
}
