package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// completion posts a /v1/completions request and returns its one choice's
// text, finish reason and completion tokens.
func completion(t *testing.T, h *harness, body map[string]any) (string, string, int) {
	t.Helper()
	body["model"] = "strata-test"
	status, data := h.post("/v1/completions", body)
	if status != 200 {
		t.Fatalf("status %d: %s", status, data)
	}
	var r completionResult
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r.Choices[0].Text, *r.Choices[0].FinishReason, r.Usage.CompletionTokens
}

// TestGenerationFields: stop_token_ids, include_stop_str_in_output,
// min_tokens and logit_bias change what a scripted model's reply becomes,
// each as the reply's own tokens say it must.
func TestGenerationFields(t *testing.T) {
	const reply = "alpha beta gamma delta"
	h := newScriptedHarness(t, reply, false)
	toks := h.tok.Encode(reply, true)
	if len(toks) < 4 {
		t.Fatalf("the reply is %d tokens; the test needs 4", len(toks))
	}
	// /v1/completions prompts have no assistant marker, so the scripted
	// model answers with EOS at once; chat is where the reply is.
	chatText := func(extra map[string]any) (string, string, int) {
		t.Helper()
		body := map[string]any{"model": "strata-test", "messages": []map[string]string{{"role": "user", "content": "go"}}}
		for k, v := range extra {
			body[k] = v
		}
		status, data := h.post("/v1/chat/completions", body)
		if status != 200 {
			t.Fatalf("status %d: %s", status, data)
		}
		var r struct {
			Choices []chatChoiceJSON
			Usage   usageJSON
		}
		json.Unmarshal(data, &r)
		c := r.Choices[0]
		text := ""
		if c.Message.Content != nil {
			text = *c.Message.Content
		}
		return text, c.FinishReason, r.Usage.CompletionTokens
	}
	k := 2 // the stop token is the reply's third token
	for _, tc := range []struct {
		name   string
		extra  map[string]any
		text   string
		finish string
		tokens int
	}{
		{"plain", nil, reply, "stop", len(toks) + 1},
		{"stop_token_ids", map[string]any{"stop_token_ids": []int32{toks[k]}}, h.tok.Decode(toks[:k], true), "stop", k + 1},
		{"stop_token_ids, included", map[string]any{"stop_token_ids": []int32{toks[k]}, "include_stop_str_in_output": true}, h.tok.Decode(toks[:k+1], true), "stop", k + 1},
		{"stop string", map[string]any{"stop": "gamma"}, "alpha beta ", "stop", -1},
		{"stop string, included", map[string]any{"stop": "gamma", "include_stop_str_in_output": true}, "alpha beta gamma", "stop", -1},
		// EOS held back: the model's greedy choice is then its best other
		// token (all are 0: the first id, BOS, a special token with no text).
		{"min_tokens", map[string]any{"min_tokens": len(toks) + 5, "max_tokens": len(toks) + 10, "temperature": 0}, reply, "stop", len(toks) + 6},
		{"min_tokens below the reply", map[string]any{"min_tokens": 2}, reply, "stop", len(toks) + 1},
		// A +100 bias beats the script's +30.
		{"logit_bias", map[string]any{"logit_bias": map[string]float64{itoa(int(toks[3])): 100}, "max_tokens": 2}, h.tok.Decode([]int32{toks[3], toks[3]}, true), "length", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text, finish, n := chatText(tc.extra)
			if text != tc.text || finish != tc.finish || (tc.tokens >= 0 && n != tc.tokens) {
				t.Errorf("text %q finish %q tokens %d; want %q %q %d", text, finish, n, tc.text, tc.finish, tc.tokens)
			}
		})
	}
	// The same fields on /v1/completions, where the model ends at once:
	// min_tokens holds that EOS back too.
	if _, finish, n := completion(t, h, map[string]any{"prompt": "x", "min_tokens": 3, "max_tokens": 8, "temperature": 0}); finish != "stop" || n != 4 {
		t.Errorf("completions min_tokens 3: finish %q, %d tokens; want stop after 4", finish, n)
	}
	h.waitIdle()
}

// TestChatResponseFields: what clients read that carries no generation:
// message.refusal is null, content is null for a reply that only reasoned
// before max_tokens cut it, and with include_usage every chunk has usage
// null except the last, which has it (without include_usage chunks have
// no usage field); usage has prompt_tokens_details.cached_tokens.
func TestChatResponseFields(t *testing.T) {
	h := newScriptedHarness(t, "A long line of reasoning that never ends", true)
	body := map[string]any{"model": "strata-test", "messages": []map[string]string{{"role": "user", "content": "q"}},
		"reasoning_effort": "high", "max_tokens": 3}
	status, data := h.post("/v1/chat/completions", body)
	if status != 200 {
		t.Fatalf("status %d: %s", status, data)
	}
	var raw struct {
		Choices []struct {
			Message      map[string]json.RawMessage
			FinishReason string `json:"finish_reason"`
		}
		Usage map[string]json.RawMessage
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	m := raw.Choices[0].Message
	if string(m["content"]) != "null" || string(m["refusal"]) != "null" || raw.Choices[0].FinishReason != "length" || string(m["reasoning_content"]) == `""` {
		t.Errorf("a reasoning-only reply cut by length: %s", data)
	}
	if string(raw.Usage["prompt_tokens_details"]) != `{"cached_tokens":0}` || string(raw.Usage["completion_tokens_details"]) != `{"reasoning_tokens":3}` {
		t.Errorf("usage %s", data)
	}

	for _, include := range []bool{true, false} {
		body := map[string]any{"model": "strata-test", "messages": []map[string]string{{"role": "user", "content": "q"}}, "stream": true, "max_tokens": 5}
		if include {
			body["stream_options"] = map[string]bool{"include_usage": true}
		}
		b, _ := json.Marshal(body)
		resp, err := http.Post(h.url+"/v1/chat/completions", "application/json", strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		events := sseEvents(t, resp.Body)
		resp.Body.Close()
		events = events[:len(events)-1] // [DONE]
		for i, ev := range events {
			var c map[string]json.RawMessage
			json.Unmarshal([]byte(ev), &c)
			u, has := c["usage"]
			switch {
			case !include && has:
				t.Errorf("without include_usage, chunk %d has usage: %s", i, ev)
			case include && i < len(events)-1 && string(u) != "null":
				t.Errorf("include_usage: chunk %d has usage %s, want null", i, u)
			case include && i == len(events)-1 && (!has || string(u) == "null" || string(c["choices"]) != "[]"):
				t.Errorf("include_usage: the last chunk is %s", ev)
			}
		}
	}
	h.waitIdle()
}

// TestChatCachedTokens: a repeated long prompt hits the prefix cache, and
// usage.prompt_tokens_details.cached_tokens says how much, as the engine
// counted it, streaming and not (openai-go reads it).
func TestChatCachedTokens(t *testing.T) {
	h := newHarness(t)
	params := openai.ChatCompletionNewParams{Model: "strata-test", MaxTokens: openai.Int(3),
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage(strings.Repeat("And God said, Let there be light: and there was light. ", 25)),
			openai.UserMessage("And God saw the light.")}}
	first, err := h.client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if first.Usage.PromptTokensDetails.CachedTokens != 0 {
		t.Fatalf("the first request hit %d tokens", first.Usage.PromptTokensDetails.CachedTokens)
	}
	for _, stream := range []bool{false, true} {
		before := h.eng.Stats().PrefixHitTokens
		var u openai.CompletionUsage
		if stream {
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			chunks, _ := streamChat(t, h, params)
			u = chunks[len(chunks)-1].Usage
		} else {
			r, err := h.client.Chat.Completions.New(context.Background(), params)
			if err != nil {
				t.Fatal(err)
			}
			u = r.Usage
		}
		hit := h.eng.Stats().PrefixHitTokens - before
		if hit == 0 || u.PromptTokensDetails.CachedTokens != hit || u.PromptTokens != first.Usage.PromptTokens {
			t.Errorf("stream %v: %d of %d prompt tokens cached; the engine hit %d", stream, u.PromptTokensDetails.CachedTokens, u.PromptTokens, hit)
		}
	}
	h.waitIdle()
}

// TestKeepAlive: while a request waits for its first token (the engine is
// held stopped, as in a long prefill), its stream gets keep-alives: SSE
// comments on the OpenAI endpoints, ping events on Anthropic's; once the
// engine runs, the stream completes as usual. Each endpoint gets a
// harness of its own: once started, an engine cannot be held again, and a
// running one may answer before any keep-alive is due.
func TestKeepAlive(t *testing.T) {
	for _, tc := range []struct {
		path, body, ping string
	}{
		{"/v1/chat/completions", `{"model":"strata-test","stream":true,"max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`, ": keep-alive"},
		{"/v1/messages", `{"model":"strata-test","stream":true,"max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`, "event: ping"},
		{"/v1/responses", `{"model":"strata-test","stream":true,"max_output_tokens":3,"input":"hi"}`, ": keep-alive"},
	} {
		h := newHarness(t, func(c *harnessConfig) {
			c.noRun = true
			c.opt.KeepAlive = time.Millisecond // the test blocks until keep-alives come, however long that takes
		})
		resp, err := http.Post(h.url+tc.path, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		pings := 0
		for pings < 3 && sc.Scan() { // blocks until keep-alives arrive: no token can
			if sc.Text() == tc.ping {
				pings++
			}
		}
		if pings < 3 {
			t.Fatalf("%s: the stream ended without keep-alives: %v", tc.path, sc.Err())
		}
		h.startEngine()
		rest := 0
		for sc.Scan() {
			rest++
		}
		resp.Body.Close()
		if rest == 0 {
			t.Errorf("%s: nothing after the keep-alives", tc.path)
		}
		h.waitIdle()
	}
}

// TestAPIKey: with an API key every request needs it (Bearer or
// x-api-key) except those to the public paths; others get 401 in their
// API's error shape, and the SDKs send it as they do for the real APIs.
func TestAPIKey(t *testing.T) {
	h := newHarness(t, func(c *harnessConfig) {
		c.opt.APIKey = "sekret"
		c.opt.PublicPaths = []string{"/health"}
	})
	get := func(path string, header ...string) (int, string) {
		req, _ := http.NewRequest("GET", h.url+path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		bufio.NewReader(resp.Body).WriteTo(&b)
		return resp.StatusCode, b.String()
	}
	for _, tc := range []struct {
		path   string
		header []string
		status int
	}{
		{"/v1/models", nil, 401},
		{"/v1/models", []string{"Authorization", "Bearer wrong"}, 401},
		{"/v1/models", []string{"Authorization", "Bearer sekret"}, 200},
		{"/v1/models", []string{"Authorization", "bearer sekret"}, 200},
		{"/v1/models", []string{"X-Api-Key", "sekret"}, 200},
		{"/health", nil, 200},
		{"/metrics", nil, 401},
		{"/metrics", []string{"Authorization", "Bearer sekret"}, 200},
	} {
		if status, body := get(tc.path, tc.header...); status != tc.status {
			t.Errorf("GET %s %v: %d, want %d: %s", tc.path, tc.header, status, tc.status, body)
		}
	}
	if status, body := get("/v1/messages"); status != 401 || !strings.Contains(body, `"authentication_error"`) {
		t.Errorf("Anthropic path without a key: %d %s", status, body)
	}
	if status, body := get("/v1/models"); !strings.Contains(body, `"invalid_api_key"`) || status != 401 {
		t.Errorf("OpenAI path without a key: %d %s", status, body)
	}
	bad := openai.NewClient(option.WithBaseURL(h.url+"/v1/"), option.WithAPIKey("wrong"), option.WithMaxRetries(0))
	if _, err := bad.Models.List(context.Background()); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("openai-go with a wrong key: %v", err)
	}
	good := openai.NewClient(option.WithBaseURL(h.url+"/v1/"), option.WithAPIKey("sekret"), option.WithMaxRetries(0))
	if _, err := good.Models.List(context.Background()); err != nil {
		t.Errorf("openai-go with the key: %v", err)
	}
	count := anthropic.MessageCountTokensParams{Model: "strata-test", Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
	ac := h.anthropic(aoption.WithAPIKey("sekret"))
	if _, err := ac.Messages.CountTokens(context.Background(), count); err != nil {
		t.Errorf("the Anthropic SDK with the key (x-api-key): %v", err)
	}
	ac = h.anthropic(aoption.WithAPIKey("wrong"))
	var ae *anthropic.Error
	if _, err := ac.Messages.CountTokens(context.Background(), count); !errors.As(err, &ae) || ae.StatusCode != 401 {
		t.Errorf("the Anthropic SDK with a wrong key: %v", err)
	}
}

// syncWriter is a log destination safe for the server's goroutines.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestPrefillWorkerHealth: a prefill worker whose decode worker is
// unreachable reports 503 unhealthy on /health and logs it at WARN, once;
// when the decode worker is back, it is healthy again.
func TestPrefillWorkerHealth(t *testing.T) {
	decode := newHarness(t, func(c *harnessConfig) { c.opt.AcceptHandoff = true })
	var logw syncWriter
	prefill := newHarness(t, func(c *harnessConfig) {
		c.opt.DecodeURL = decode.url
		c.log = &logw
	})
	health := func() (int, string) {
		resp, err := http.Get(prefill.url + "/health")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		bufio.NewReader(resp.Body).WriteTo(&b)
		return resp.StatusCode, b.String()
	}
	if status, body := health(); status != 200 {
		t.Fatalf("with the decode worker up: %d %s", status, body)
	}
	decode.http.Close() // the decode worker goes away
	for range 2 {
		if status, body := health(); status != 503 || !strings.Contains(body, `"unhealthy"`) || !strings.Contains(body, decode.url) {
			t.Errorf("with the decode worker down: %d %s", status, body)
		}
	}
	if n := strings.Count(logw.String(), "level=WARN"); n != 1 || !strings.Contains(logw.String(), "decode worker is unreachable") {
		t.Errorf("%d WARN lines; want one saying the decode worker is unreachable:\n%s", n, logw.String())
	}
}

// TestTokenize: /tokenize gives the ids a completions prompt (BOS first
// when the tokenizer adds it) or a chat conversation (rendered as chat
// completions renders it) would have, /detokenize gives the text back, and
// a body with a UTF-8 byte order mark is read like one without.
func TestTokenize(t *testing.T) {
	h := newHarness(t)
	post := func(path, body string) map[string]json.RawMessage {
		t.Helper()
		status, data := h.post(path, body)
		if status != 200 {
			t.Fatalf("%s: status %d: %s", path, status, data)
		}
		var out map[string]json.RawMessage
		json.Unmarshal(data, &out)
		return out
	}
	ids := func(raw json.RawMessage) []int32 {
		var v []int32
		json.Unmarshal(raw, &v)
		return v
	}
	const text = "And God said, Let there be light"
	want := h.tok.Encode(text, true)
	if h.tok.AddBOS() {
		want = append([]int32{h.tok.BOS()}, want...)
	}
	for _, body := range []string{`{"model":"strata-test","prompt":"` + text + `"}`, utf8BOM + `{"prompt":"` + text + `"}`} {
		out := post("/tokenize", body)
		if got := ids(out["tokens"]); !slices.Equal(got, want) || string(out["count"]) != itoa(len(want)) {
			t.Errorf("tokenize %q: %v (count %s), want %v", body, got, out["count"], want)
		}
	}
	out := post("/tokenize", `{"messages":[{"role":"user","content":"hi"}],"reasoning_effort":"high","return_token_strs":true}`)
	if n := len(ids(out["tokens"])); n != h.promptTokens(userMsg("hi"), nil, ChatOptions{Thinking: true, ReasoningEffort: "high"}) {
		t.Errorf("tokenize messages: %d tokens", n)
	}
	var strs []string
	if json.Unmarshal(out["token_strs"], &strs); len(strs) != len(ids(out["tokens"])) {
		t.Errorf("token_strs %s", out["token_strs"])
	}
	b, _ := json.Marshal(map[string]any{"tokens": want, "skip_special_tokens": true})
	var back string
	json.Unmarshal(post("/detokenize", string(b))["prompt"], &back)
	if back != text {
		t.Errorf("detokenize: %q, want %q", back, text)
	}
	for _, body := range []string{`{"tokens":[999999]}`, `{"prompt":"a","messages":[]}`, `{"model":"other","prompt":"a"}`, `{}`} {
		path := "/tokenize"
		if strings.Contains(body, "tokens") {
			path = "/detokenize"
		}
		if status, data := h.post(path, body); status/100 != 4 {
			t.Errorf("%s %s: status %d: %s", path, body, status, data)
		}
	}
}
