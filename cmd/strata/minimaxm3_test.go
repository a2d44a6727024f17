package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/strata-inference/strata/engine"
	"github.com/strata-inference/strata/server/servertest"
	"github.com/strata-inference/strata/tokenizer/chat"
)

// TestCheckGoldenMiniMaxM3: check-golden and its batched form pass on the
// MiniMax-M3 case, chosen by its config's model_type.
func TestCheckGoldenMiniMaxM3(t *testing.T) {
	dir := root("testdata/golden/minimax-m3/tiny")
	out, err := run(t, "check-golden", dir)
	if err != nil || !strings.Contains(out, "greedy   24/24 ids match  ok") {
		t.Fatalf("check-golden: %v\n%s", err, out)
	}
	out, err = run(t, "check-golden", "-batched", dir)
	if err != nil || !strings.Contains(out, "preemptions") {
		t.Fatalf("check-golden -batched: %v\n%s", err, out)
	}
}

// TestServeMiniMaxM3: `strata serve -model DIR` on a MiniMax-M3 checkpoint
// (random weights, the MiniMax tokenizer, the chat template in the folder)
// picks the MiniMax chat format, renders a chat with the folder's Jinja
// template, and its reply is what the engine generates greedily for that
// prompt, up to the end-of-turn token [e~[, read as MiniMax replies are
// (reasoning up to </think>: the template opens <think>).
func TestServeMiniMaxM3(t *testing.T) {
	dir := t.TempDir()
	if err := servertest.WriteMiniMaxM3(dir, 5); err != nil {
		t.Fatal(err)
	}
	var cfg serveConfig
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addServeFlags(fs, &cfg)
	if err := fs.Parse([]string{"-model", dir, "-cache-memory", "32MiB", "-threads", "2"}); err != nil {
		t.Fatal(err)
	}
	s, err := loadServed(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.model.Info().Arch != "minimax-m3" {
		t.Fatalf("loaded as %s", s.model.Info().Arch)
	}
	if f, err := chatFormat("auto", "", dir, "minimax-m3"); err != nil || f.Name() != "minimax" {
		t.Fatalf("auto format for minimax-m3: %v, %v", f, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.eng.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	hs := httptest.NewServer(s.srv)
	defer hs.Close()

	msgs := []chat.Message{{Role: chat.RoleSystem, Content: "Be brief."}, {Role: chat.RoleUser, Content: "What is the capital of France? Answer in one word."}}
	body, _ := json.Marshal(map[string]any{"model": s.name, "messages": msgs, "max_tokens": 24, "temperature": 0})
	resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	var r struct {
		Choices []struct {
			Message struct {
				Content          *string `json:"content"`
				ReasoningContent string  `json:"reasoning_content"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.LoadTemplate(dir)
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := tmpl.Render(msgs, nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(prompt, "]~!b[]~b]system\nBe brief.[e~[\n]~b]user\n") || !strings.HasSuffix(prompt, "[e~[\n]~b]ai\n<think>\n") {
		t.Fatalf("rendered prompt %q", prompt)
	}
	ids := s.tok.Encode(prompt, true)
	if r.Usage.PromptTokens != len(ids) {
		t.Fatalf("prompt of %d tokens, the template's rendering has %d", r.Usage.PromptTokens, len(ids))
	}
	st, err := s.eng.Submit(context.Background(), engine.Request{Prompt: ids, MaxTokens: 24})
	if err != nil {
		t.Fatal(err)
	}
	toks, _, err := st.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) > 0 && toks[len(toks)-1] == s.eng.EOS() {
		toks = toks[:len(toks)-1]
	}
	want, _ := chat.ParseMiniMax(s.tok.Decode(toks, true), true, nil)
	got := r.Choices[0].Message
	content := ""
	if got.Content != nil {
		content = *got.Content
	}
	if got.ReasoningContent != want.Reasoning || content != want.Content {
		t.Fatalf("reply reasoning %q content %q, the engine's %#v", got.ReasoningContent, content, want)
	}
	t.Logf("%d prompt tokens, reply reasoning %q content %q", len(ids), got.ReasoningContent, content)
}
