package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/strata-inference/strata/engine"
)

// TestErrors: bad requests get OpenAI-style JSON errors with the right
// status, type, param and code, and start nothing in the engine.
func TestErrors(t *testing.T) {
	h := newHarness(t, func(c *harnessConfig) {
		c.opt.MaxBodyBytes = 4 << 10
		c.opt.MaxContext = 96
	})
	long := strings.Repeat("word ", 200)
	chat := func(extra string) string {
		return `{"model":"strata-test","messages":[{"role":"user","content":"hi"}]` + extra + `}`
	}
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		param, code              string
	}{
		{"malformed JSON", "POST", "/v1/chat/completions", `{"model":`, 400, "", "invalid_json"},
		{"not an object", "POST", "/v1/chat/completions", `[1,2]`, 400, "", "invalid_json"},
		{"trailing data", "POST", "/v1/chat/completions", chat("") + `{}`, 400, "", "invalid_json"},
		{"empty body", "POST", "/v1/chat/completions", ``, 400, "", "invalid_json"},
		{"wrong type", "POST", "/v1/chat/completions", chat(`,"temperature":"hot"`), 400, "temperature", "invalid_type"},
		{"temperature -1", "POST", "/v1/chat/completions", chat(`,"temperature":-1`), 400, "temperature", "invalid_value"},
		{"top_p 0", "POST", "/v1/chat/completions", chat(`,"top_p":0`), 400, "top_p", "invalid_value"},
		{"n 0", "POST", "/v1/chat/completions", chat(`,"n":0`), 400, "n", "invalid_value"},
		{"n above the server's limit", "POST", "/v1/chat/completions", chat(`,"n":17`), 400, "n", "invalid_value"},
		{"max_tokens 0", "POST", "/v1/chat/completions", chat(`,"max_tokens":0`), 400, "max_tokens", "invalid_value"},
		{"top_logprobs without logprobs", "POST", "/v1/chat/completions", chat(`,"top_logprobs":2`), 400, "top_logprobs", "invalid_value"},
		{"top_logprobs 21", "POST", "/v1/chat/completions", chat(`,"logprobs":true,"top_logprobs":21`), 400, "top_logprobs", "invalid_value"},
		{"empty stop string", "POST", "/v1/chat/completions", chat(`,"stop":[""]`), 400, "stop[0]", "invalid_value"},
		{"stream_options without stream", "POST", "/v1/chat/completions", chat(`,"stream_options":{"include_usage":true}`), 400, "stream_options", "invalid_value"},
		{"thinking contradiction", "POST", "/v1/chat/completions", chat(`,"reasoning_effort":"high","thinking":{"type":"disabled"}`), 400, "thinking.type", "invalid_value"},
		{"logit_bias outside the vocabulary", "POST", "/v1/chat/completions", chat(`,"logit_bias":{"999999":1}`), 400, "logit_bias", "invalid_value"},
		{"logit_bias not a token id", "POST", "/v1/chat/completions", chat(`,"logit_bias":{"a":1}`), 400, "logit_bias", "invalid_value"},
		{"logit_bias above 100", "POST", "/v1/chat/completions", chat(`,"logit_bias":{"5":101}`), 400, "logit_bias", "invalid_value"},
		{"stop_token_ids outside the vocabulary", "POST", "/v1/completions", `{"model":"strata-test","prompt":"a","stop_token_ids":[999999]}`, 400, "stop_token_ids[0]", "invalid_value"},
		{"min_tokens above max_tokens", "POST", "/v1/chat/completions", chat(`,"max_tokens":2,"min_tokens":3`), 400, "min_tokens", "invalid_value"},
		{"min_tokens negative", "POST", "/v1/completions", `{"model":"strata-test","prompt":"a","min_tokens":-1}`, 400, "min_tokens", "invalid_value"},
		{"unknown field", "POST", "/v1/chat/completions", chat(`,"frobnicate":1`), 400, "frobnicate", "unsupported_parameter"},
		{"unknown field in a message", "POST", "/v1/chat/completions", `{"model":"strata-test","messages":[{"role":"user","content":"hi","mood":"x"}]}`, 400, "mood", "unsupported_parameter"},
		{"known but unsupported field", "POST", "/v1/chat/completions", chat(`,"audio":{"voice":"x"}`), 400, "audio", "unsupported_parameter"},
		{"store true", "POST", "/v1/chat/completions", chat(`,"store":true`), 400, "store", "unsupported_value"},
		{"service_tier flex", "POST", "/v1/chat/completions", chat(`,"service_tier":"flex"`), 400, "service_tier", "unsupported_value"},
		{"invalid UTF-8", "POST", "/v1/chat/completions", "{\"model\":\"strata-test\",\"messages\":[{\"role\":\"user\",\"content\":\"h\xffi\"}]}", 400, "", "invalid_json"},
		{"unknown field (completions)", "POST", "/v1/completions", `{"model":"strata-test","prompt":"a","best_of_n":2}`, 400, "best_of_n", "unsupported_parameter"},
		{"tool_choice required without tools", "POST", "/v1/chat/completions", chat(`,"tool_choice":"required"`), 400, "tool_choice", "invalid_value"},
		{"tool_choice names a missing tool", "POST", "/v1/chat/completions", chat(`,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}`), 400, "tool_choice.function.name", "invalid_value"},
		{"response_format type", "POST", "/v1/chat/completions", chat(`,"response_format":{"type":"yaml"}`), 400, "response_format.type", "invalid_value"},
		{"json_schema without name", "POST", "/v1/chat/completions", chat(`,"response_format":{"type":"json_schema","json_schema":{"schema":{}}}`), 400, "response_format.json_schema.name", "invalid_value"},
		{"unsupported schema keyword", "POST", "/v1/chat/completions", chat(`,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","not":{"const":"a"}}}}`), 400, "response_format.json_schema.schema", "unsupported_value"},
		{"unsupported keyword in tool parameters", "POST", "/v1/chat/completions", chat(`,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"not":{}}}}}}],"tool_choice":"required"`), 400, "tools", "unsupported_value"},
		{"unsupported schema keyword (completions)", "POST", "/v1/completions", `{"model":"strata-test","prompt":"a","response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"uniqueItems":true}}}}`, 400, "response_format.json_schema.schema", "unsupported_value"},
		{"no messages", "POST", "/v1/chat/completions", `{"model":"strata-test","messages":[]}`, 400, "messages", "missing_required_parameter"},
		{"no model", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, 400, "model", "missing_required_parameter"},
		{"bad role", "POST", "/v1/chat/completions", `{"model":"strata-test","messages":[{"role":"wizard","content":"hi"}]}`, 400, "messages[0].role", "invalid_value"},
		{"image part", "POST", "/v1/chat/completions", `{"model":"strata-test","messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, 400, "messages[0].content[0].type", "unsupported_value"},
		{"tool arguments not an object", "POST", "/v1/chat/completions", `{"model":"strata-test","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`, 400, "messages[0].tool_calls[0].function.arguments", "invalid_value"},
		{"unknown model", "POST", "/v1/chat/completions", `{"model":"gpt-9","messages":[{"role":"user","content":"hi"}]}`, 404, "model", "model_not_found"},
		{"unknown model (completions)", "POST", "/v1/completions", `{"model":"gpt-9","prompt":"hi"}`, 404, "model", "model_not_found"},
		{"unknown model (models)", "GET", "/v1/models/gpt-9", ``, 404, "model", "model_not_found"},
		{"body too large", "POST", "/v1/chat/completions", chat(`,"user":"` + strings.Repeat("x", 5<<10) + `"`), 413, "", "request_too_large"},
		{"prompt longer than the context", "POST", "/v1/chat/completions", `{"model":"strata-test","messages":[{"role":"user","content":"` + long + `"}]}`, 400, "messages", "context_length_exceeded"},
		{"prompt plus max_tokens over the context", "POST", "/v1/chat/completions", chat(`,"max_tokens":95`), 400, "messages", "context_length_exceeded"},
		{"completions prompt too long", "POST", "/v1/completions", `{"model":"strata-test","prompt":"` + long + `"}`, 400, "prompt", "context_length_exceeded"},
		{"token id outside the vocabulary", "POST", "/v1/completions", `{"model":"strata-test","prompt":[1,2,999999]}`, 400, "prompt[2]", "invalid_value"},
		{"empty prompt array", "POST", "/v1/completions", `{"model":"strata-test","prompt":[]}`, 400, "prompt", "invalid_value"},
		{"echo with logprobs", "POST", "/v1/completions", `{"model":"strata-test","prompt":"a","echo":true,"logprobs":1}`, 400, "echo", "unsupported_value"},
		{"suffix", "POST", "/v1/completions", `{"model":"strata-test","prompt":"a","suffix":"b"}`, 400, "suffix", "unsupported_value"},
		{"wrong method", "GET", "/v1/chat/completions", ``, 405, "", "method_not_allowed"},
		{"unknown path", "GET", "/v2/everything", ``, 404, "", "unknown_url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, h.url+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, data)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("content type %q", ct)
			}
			var e struct {
				Error struct {
					Message *string `json:"message"`
					Type    *string `json:"type"`
					Param   *string `json:"param"`
					Code    *string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(data, &e); err != nil || e.Error.Message == nil || *e.Error.Message == "" || e.Error.Type == nil {
				t.Fatalf("body %s is not an OpenAI error object (%v)", data, err)
			}
			if p := e.Error.Param; (p == nil && tc.param != "") || (p != nil && *p != tc.param) {
				t.Errorf("param %v, want %q: %s", deref(p), tc.param, data)
			}
			if c := e.Error.Code; c == nil || *c != tc.code {
				t.Errorf("code %v, want %q: %s", deref(c), tc.code, data)
			}
		})
	}
	if st := h.eng.Stats(); st.Finished+st.Cancelled != 0 || st.Steps != 0 {
		t.Errorf("bad requests reached the engine: %+v", st)
	}
}

func deref(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestErrorsSDK: openai-go reads the server's errors into *openai.Error
// with the status, code and param.
func TestErrorsSDK(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		params      openai.ChatCompletionNewParams
		status      int
		code, param string
	}{
		{openai.ChatCompletionNewParams{Model: "nope", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}, 404, "model_not_found", "model"},
		{openai.ChatCompletionNewParams{Model: "strata-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}, Temperature: openai.Float(-1)}, 400, "invalid_value", "temperature"},
	} {
		_, err := h.client.Chat.Completions.New(context.Background(), tc.params)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("error %v is not an *openai.Error", err)
		}
		if apiErr.StatusCode != tc.status || apiErr.Code != tc.code || apiErr.Param != tc.param || apiErr.Message == "" {
			t.Errorf("status %d code %q param %q message %q; want %d %q %q", apiErr.StatusCode, apiErr.Code, apiErr.Param, apiErr.Message, tc.status, tc.code, tc.param)
		}
	}
}

// TestQueueFull: when the engine's queue is full, a request gets 503 with
// Retry-After at once, and what it would have started is not left behind.
// The engine is kept stopped so that the first request stays queued.
func TestQueueFull(t *testing.T) {
	h := newHarness(t, func(c *harnessConfig) {
		c.noRun = true
		c.maxQueue = 2
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The first request, submitted to the engine directly, is queued when
	// Submit returns (the engine is not running, so it stays queued).
	first, err := h.eng.Submit(ctx, engine.Request{Prompt: h.tok.Encode("hi", true), MaxTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	if st := h.eng.Stats(); st.Waiting != 1 {
		t.Fatalf("%d requests waiting after the first Submit, want 1", st.Waiting)
	}
	// n=2 needs two places and one is left: the whole request is refused
	// and its first engine request withdrawn.
	status, body := h.post("/v1/chat/completions", `{"model":"strata-test","n":2,"max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`)
	if status != http.StatusServiceUnavailable || !strings.Contains(string(body), `"queue_full"`) {
		t.Fatalf("status %d body %s, want 503 queue_full", status, body)
	}
	resp, err := http.Post(h.url+"/v1/completions", "application/json", strings.NewReader(`{"model":"strata-test","prompt":"a","n":3}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("completions: status %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	cancel()
	h.startEngine()
	guard, stop := context.WithTimeout(context.Background(), hangGuard) // only against a hang
	defer stop()
	if _, _, err := first.Collect(guard); !errors.Is(err, context.Canceled) {
		t.Errorf("the first request ended with %v, want it cancelled", err)
	}
	h.waitIdle()
}
