package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestCompletions: openai-go gets a legacy completion, non-streaming and
// streaming, with the same text for the same seed; the prompt counts BOS
// (add_bos_token) and its tokens; legacy logprobs have one entry per token
// with at most k alternatives and increasing offsets.
func TestCompletions(t *testing.T) {
	h := newHarness(t)
	const prompt = "And the evening and the morning were the first day."
	wantPrompt := len(h.tok.Encode(prompt, true))
	if h.tok.AddBOS() {
		wantPrompt++
	}
	params := openai.CompletionNewParams{
		Model:       "strata-test",
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
		MaxTokens:   openai.Int(9),
		Seed:        openai.Int(3),
		Temperature: openai.Float(0.9),
		Logprobs:    openai.Int(2),
	}
	ignoreEOS := option.WithJSONSet("ignore_eos", true)
	resp, err := h.client.Completions.New(context.Background(), params, ignoreEOS)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.ID, "cmpl-") || resp.Object != "text_completion" || len(resp.Choices) != 1 {
		t.Fatalf("response %s", resp.RawJSON())
	}
	c := resp.Choices[0]
	if c.FinishReason != "length" || resp.Usage.CompletionTokens != 9 || resp.Usage.PromptTokens != int64(wantPrompt) {
		t.Errorf("finish %q usage %d+%d, want length %d+9", c.FinishReason, resp.Usage.PromptTokens, resp.Usage.CompletionTokens, wantPrompt)
	}
	lp := c.Logprobs
	if len(lp.Tokens) != 9 || len(lp.TokenLogprobs) != 9 || len(lp.TopLogprobs) != 9 || len(lp.TextOffset) != 9 {
		t.Fatalf("logprobs of %d/%d/%d/%d entries, want 9", len(lp.Tokens), len(lp.TokenLogprobs), len(lp.TopLogprobs), len(lp.TextOffset))
	}
	for i := range lp.Tokens {
		if len(lp.TopLogprobs[i]) == 0 || len(lp.TopLogprobs[i]) > 2 || lp.TokenLogprobs[i] > 0 {
			t.Errorf("entry %d: %d alternatives, logprob %g", i, len(lp.TopLogprobs[i]), lp.TokenLogprobs[i])
		}
		if i > 0 && lp.TextOffset[i] != lp.TextOffset[i-1]+int64(len(lp.Tokens[i-1])) {
			t.Errorf("offset %d is %d after %q at %d", i, lp.TextOffset[i], lp.Tokens[i-1], lp.TextOffset[i-1])
		}
	}

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := h.client.Completions.NewStreaming(context.Background(), params, ignoreEOS)
	var text strings.Builder
	var tokens, finishes int
	var usage openai.CompletionUsage
	for s.Next() {
		ch := s.Current()
		if ch.ID == "" || ch.Object != "text_completion" {
			t.Errorf("chunk %s", ch.RawJSON())
		}
		for _, cc := range ch.Choices {
			text.WriteString(cc.Text)
			tokens += len(cc.Logprobs.Tokens)
			if cc.FinishReason != "" {
				finishes++
			}
		}
		if len(ch.Choices) == 0 {
			usage = ch.Usage
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != c.Text || tokens != 9 || finishes != 1 || usage.CompletionTokens != 9 {
		t.Errorf("streamed %q (%d tokens, %d finishes, usage %d), non-streamed %q", text.String(), tokens, finishes, usage.CompletionTokens, c.Text)
	}
	h.waitIdle()
}

// TestCompletionsPrompts: several prompts, token-id prompts, n and echo:
// choice p*n+i answers prompt p with seed+i; echo puts the prompt first;
// the prompt tokens add up over the prompts.
func TestCompletionsPrompts(t *testing.T) {
	h := newHarness(t)
	ids := h.tok.Encode("Let there be light", false)
	ask := func(body map[string]any) completionResult {
		t.Helper()
		body["model"] = "strata-test"
		body["max_tokens"] = 5
		body["ignore_eos"] = true
		body["seed"] = 11
		status, data := h.post("/v1/completions", body)
		if status != 200 {
			t.Fatalf("status %d: %s", status, data)
		}
		var r completionResult
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := ask(map[string]any{"prompt": []string{"In the beginning", "And God said"}, "n": 2})
	if len(r.Choices) != 4 || r.Usage.CompletionTokens != 20 {
		t.Fatalf("%d choices, %d completion tokens; want 4, 20", len(r.Choices), r.Usage.CompletionTokens)
	}
	wantPrompt := 0
	for _, p := range []string{"In the beginning", "And God said"} {
		wantPrompt += len(h.tok.Encode(p, true))
		if h.tok.AddBOS() {
			wantPrompt++
		}
	}
	if r.Usage.PromptTokens != wantPrompt {
		t.Errorf("prompt tokens %d, want %d", r.Usage.PromptTokens, wantPrompt)
	}
	one := ask(map[string]any{"prompt": "And God said", "n": 2})
	for i := range 2 {
		if r.Choices[2+i].Text != one.Choices[i].Text || r.Choices[2+i].Index != 2+i {
			t.Errorf("choice %d: %q (index %d), want %q", 2+i, r.Choices[2+i].Text, r.Choices[2+i].Index, one.Choices[i].Text)
		}
	}
	toks := ask(map[string]any{"prompt": ids, "echo": true})
	if !strings.HasPrefix(toks.Choices[0].Text, "Let there be light") || toks.Usage.PromptTokens != len(ids) {
		t.Errorf("token prompt with echo: %q, %d prompt tokens (want %d)", toks.Choices[0].Text, toks.Usage.PromptTokens, len(ids))
	}
}

// completionResult is a /v1/completions response as a client reads it.
type completionResult struct {
	Choices []completionChoiceJSON
	Usage   usageJSON
}
