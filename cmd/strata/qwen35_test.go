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
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-inference/strata/server"
	"github.com/strata-inference/strata/server/servertest"
	"github.com/strata-inference/strata/tokenizer/chat"
)

// qwenFolder assembles a tiny Qwen3.5 model folder as the Hub ships one:
// the dense golden case's config and weights (vocabulary 320), the
// synthetic test tokenizer (its vocabulary is 320 too) and Qwen3.5's chat
// template.
func qwenFolder(t *testing.T) string {
	t.Helper()
	dir, tokDir := t.TempDir(), t.TempDir()
	if err := servertest.WriteSynthetic(tokDir, 1); err != nil {
		t.Fatal(err)
	}
	copyFile := func(src, name string) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"config.json", "model.safetensors", "generation_config.json", "golden.json", "golden.safetensors"} {
		copyFile(root(filepath.Join("testdata/golden/qwen3.5/tiny", f)), f)
	}
	copyFile(filepath.Join(tokDir, "tokenizer.json"), "tokenizer.json")
	copyFile(filepath.Join(tokDir, "tokenizer_config.json"), "tokenizer_config.json")
	copyFile(root("tokenizer/chat/testdata/qwen3.5/chat_template.jinja"), "chat_template.jinja")
	return dir
}

// TestQwen35Commands: check-golden (plain and batched) passes on both
// Qwen3.5 cases through the registry, and generate, bench and serve run
// with -model pointing at a Qwen3.5 folder; serve picks Qwen3.5's chat
// format by itself and answers a chat completion rendered by its template.
func TestQwen35Commands(t *testing.T) {
	for _, c := range []string{"testdata/golden/qwen3.5/tiny", "testdata/golden/qwen3.5-moe/tiny"} {
		out, err := run(t, "check-golden", root(c))
		if err != nil || !strings.Contains(out, "greedy   24/24 ids match  ok") {
			t.Fatalf("check-golden %s: %v\n%s", c, err, out)
		}
		out, err = run(t, "check-golden", "-batched", root(c))
		if err != nil || !strings.Contains(out, "preemptions") {
			t.Fatalf("check-golden -batched %s: %v\n%s", c, err, out)
		}
	}
	dir := qwenFolder(t)
	out, err := run(t, "generate", "-model", dir, "-prompt", "hello there", "-n", "6")
	if err != nil || !strings.Contains(out, "generated 6 tokens") {
		t.Fatalf("generate: %v\n%s", err, out)
	}
	out, err = run(t, "bench", "decode", "-model", dir, "-batch", "2", "-n", "8", "-prompt", "16")
	if err != nil || !strings.Contains(out, "ngram/k=4") || strings.Contains(out, "DIFFERS") {
		t.Fatalf("bench decode: %v\n%s", err, out)
	}

	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var cfg serveConfig
	addServeFlags(fs, &cfg)
	if err := fs.Parse([]string{"-model", dir, "-cache-memory", "64MiB"}); err != nil {
		t.Fatal(err)
	}
	s, err := loadServed(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.eng.Run(ctx); close(done) }()
	defer func() { stop(); <-done }()
	srv := httptest.NewServer(s.srv)
	defer srv.Close()
	body, _ := json.Marshal(map[string]any{"model": s.name, "max_tokens": 5,
		"messages": []map[string]string{{"role": "user", "content": "Hi!"}}})
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || json.Unmarshal(b, &r) != nil || len(r.Choices) != 1 || r.Usage.CompletionTokens != 5 {
		t.Fatalf("chat completion: status %d: %s", resp.StatusCode, b)
	}
	// The prompt is Qwen3.5's template's rendering of the chat, and the
	// format reads replies with Qwen3.5's parser.
	f, err := chatFormat(cfg.chatFormat, "", dir, s.model.Info().Arch)
	if err != nil || f.Name() != "qwen3.5" {
		t.Fatalf("chat format %v, %v; want qwen3.5", f, err)
	}
	text, err := f.Render([]chat.Message{{Role: chat.RoleUser, Content: "Hi!"}}, nil, server.ChatOptions{})
	if err != nil || !strings.HasSuffix(text, "<|im_start|>assistant\n<think>\n\n</think>\n\n") {
		t.Fatalf("rendered %q, %v", text, err)
	}
	if n := len(s.tok.Encode(text, true)); r.Usage.PromptTokens != n {
		t.Errorf("%d prompt tokens, the template's rendering has %d", r.Usage.PromptTokens, n)
	}
}
