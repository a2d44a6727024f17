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
	"strings"
	"testing"

	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/engine"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/server/servertest"
	"github.com/strata-inference/strata/tokenizer/chat"
)

// TestHY4Commands: check-golden (plain and batched) passes on the HY4
// case through the registry, and plan sizes the HY4 preset.
func TestHY4Commands(t *testing.T) {
	c := root("testdata/golden/hy4/tiny")
	out, err := run(t, "check-golden", c)
	if err != nil || !strings.Contains(out, "greedy   24/24 ids match  ok") {
		t.Fatalf("check-golden: %v\n%s", err, out)
	}
	out, err = run(t, "check-golden", "-batched", c)
	if err != nil || !strings.Contains(out, "preemptions") {
		t.Fatalf("check-golden -batched: %v\n%s", err, out)
	}
	out, err = run(t, "plan", "-model", "hy4")
	if err != nil || !strings.Contains(out, "HY4: 40.8 KB per token, 0 MB fixed per request") {
		t.Fatalf("plan: %v\n%s", err, out)
	}
}

// TestServeHY4: `strata serve -model DIR` on a random-weight HY4 folder
// whose tokenizer config carries a chat template serves chat completions
// through that template (the "auto" format of an architecture without an
// encoding of its own): the prompt is the template's rendering and the
// reply what the engine generates for it, greedy.
func TestServeHY4(t *testing.T) {
	dir := t.TempDir()
	if err := servertest.WriteHY4(dir, 5); err != nil {
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
	if s.model.Info().Arch != "hy4" {
		t.Fatalf("served %q", s.model.Info().Arch)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.eng.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	hs := httptest.NewServer(s.srv)
	defer hs.Close()

	msgs := []chat.Message{{Role: chat.RoleSystem, Content: "Be brief."}, {Role: chat.RoleUser, Content: "What is the weather in Paris?"}}
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
	tmpl, err := chat.NewTemplate(servertest.HY4TestTemplate)
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := tmpl.Render(msgs, nil, true, map[string]any{"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(prompt, "<｜begin▁of▁sentence｜>Be brief.<｜User｜>What is the weather in Paris?<｜Assistant｜>") {
		t.Fatalf("rendered %q", prompt)
	}
	ids := s.tok.Encode(prompt, true) // the template's markers are special tokens
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
	want := s.tok.Decode(toks, true)
	if r.Choices[0].Message.Content == nil || *r.Choices[0].Message.Content != want {
		t.Fatalf("reply %v, the engine's %q", r.Choices[0].Message.Content, want)
	}
	if len(toks) == 0 {
		t.Fatal("the engine generated nothing")
	}
	t.Logf("%d prompt tokens, reply %q", len(ids), want)
}

// TestSynthHY4: `strata synth` writes a random-weight HY4 checkpoint that
// loads and generates.
func TestSynthHY4(t *testing.T) {
	dir := t.TempDir()
	cfgPath := dir + "/config.json"
	if err := os.WriteFile(cfgPath, []byte(servertest.HY4Config), 0o644); err != nil {
		t.Fatal(err)
	}
	out := dir + "/model"
	if o, err := run(t, "synth", "-config", cfgPath, "-out", out); err != nil {
		t.Fatalf("synth: %v\n%s", err, o)
	}
	m, err := loadModel(out, cpu.New(1), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Info().Arch != "hy4" {
		t.Fatalf("loaded %q", m.Info().Arch)
	}
	ids, err := golden.Greedy(context.Background(), m, []int32{0, 7, 9, 11}, 5)
	if err != nil || len(ids) != 5 {
		t.Fatalf("greedy %v: %v", ids, err)
	}
}
