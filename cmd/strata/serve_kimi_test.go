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
	"github.com/strata-inference/strata/model/kimilinear"
	"github.com/strata-inference/strata/server/servertest"
	"github.com/strata-inference/strata/tokenizer/chat"
)

// TestCheckGoldenKimiLinear: check-golden and its batched form pass on the
// Kimi Linear case, chosen by its config's model_type.
func TestCheckGoldenKimiLinear(t *testing.T) {
	dir := root("testdata/golden/kimi-linear/tiny")
	out, err := run(t, "check-golden", dir)
	if err != nil || !strings.Contains(out, "greedy   24/24 ids match  ok") {
		t.Fatalf("check-golden: %v\n%s", err, out)
	}
	out, err = run(t, "check-golden", "-batched", dir)
	if err != nil || !strings.Contains(out, "preemptions") {
		t.Fatalf("check-golden -batched: %v\n%s", err, out)
	}
}

// TestServeKimiLinear: `strata serve -model DIR` on a Kimi Linear folder
// (random weights, the Kimi tokenizer's markers, Kimi's chat template)
// picks the Kimi chat format: a chat completion's prompt is the folder's
// template's rendering, and its reply what the engine generates for that
// prompt, up to <|im_end|>, read by Kimi's reply parser.
func TestServeKimiLinear(t *testing.T) {
	dir := t.TempDir()
	if err := servertest.WriteKimiLinear(dir, 5); err != nil {
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
	if s.model.Info().Arch != kimilinear.Name {
		t.Fatalf("served %s", s.model.Info().Arch)
	}
	if f, err := chatFormat("auto", "", dir, kimilinear.Name); err != nil || f.Name() != "kimi" {
		t.Fatalf("auto format for kimi-linear: %v, %v", f, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.eng.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	hs := httptest.NewServer(s.srv)
	defer hs.Close()

	tools := []chat.Tool{{Type: "function", Function: chat.ToolFunction{Name: "get_weather", Description: "Weather of a city."}}}
	msgs := []chat.Message{{Role: chat.RoleUser, Content: "What is the weather in Paris?"}}
	body, _ := json.Marshal(map[string]any{"model": s.name, "messages": msgs, "tools": tools, "max_tokens": 24, "temperature": 0})
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
				Content *string `json:"content"`
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
	prompt, err := tmpl.Render(msgs, tools, true, map[string]any{"enable_thinking": false, "thinking": false})
	if err != nil {
		t.Fatal(err)
	}
	// tojson as transformers' chat templates write it (json.dumps'
	// default separators).
	want := `<|im_system|>tool_declare<|im_middle|>[{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city."}}]<|im_end|>` +
		`<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>` +
		`<|im_user|>user<|im_middle|>What is the weather in Paris?<|im_end|><|im_assistant|>assistant<|im_middle|>`
	if prompt != want {
		t.Fatalf("rendered prompt\n%q\nwant\n%q", prompt, want)
	}
	ids := s.tok.Encode(prompt, true)
	if r.Usage.PromptTokens != len(ids) {
		t.Fatalf("prompt of %d tokens, the template's rendering has %d", r.Usage.PromptTokens, len(ids))
	}
	if ids[0] != 5 { // <|im_system|>, no BOS before it
		t.Fatalf("prompt starts with id %d", ids[0])
	}
	st, err := s.eng.Submit(context.Background(), engine.Request{Prompt: ids, MaxTokens: 24})
	if err != nil {
		t.Fatal(err)
	}
	toks, _, err := st.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if toks[len(toks)-1] == s.eng.EOS() {
		toks = toks[:len(toks)-1] // the stop token has no text in a reply
	}
	// Kimi's markup is special in its tokenizers: the reply is decoded with
	// special tokens kept and read by Kimi's parser.
	reply, err := chat.ParseKimi(s.tok.Decode(toks, false))
	if err != nil {
		t.Fatal(err)
	}
	if r.Choices[0].Message.Content == nil || *r.Choices[0].Message.Content != reply.Content {
		t.Fatalf("reply %v, the engine's %q read as %q", r.Choices[0].Message.Content, s.tok.Decode(toks, false), reply.Content)
	}
	t.Logf("%d prompt tokens, reply %q", len(ids), *r.Choices[0].Message.Content)
}
