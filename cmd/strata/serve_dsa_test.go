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
	"testing"

	"github.com/strata-inference/strata/engine"
	"github.com/strata-inference/strata/server/servertest"
	"github.com/strata-inference/strata/tokenizer/chat"
)

// TestServeDSAFamilies: `strata serve -model DIR` on a DeepSeek-V3.2 and a
// GLM-5 checkpoint (random weights, each with its tokenizer; GLM-5's folder
// carries its chat template) picks the family's chat format, and a chat
// completion's prompt is the family's rendering of the conversation and
// its reply what the engine generates for that prompt, read by the
// family's reply parser.
func TestServeDSAFamilies(t *testing.T) {
	tools := []chat.Tool{{Type: "function", Function: chat.ToolFunction{Name: "get_weather", Description: "Weather of a city."}}}
	msgs := []chat.Message{{Role: chat.RoleSystem, Content: "Be brief."}, {Role: chat.RoleUser, Content: "What is the weather in Paris?"}}
	for _, tc := range []struct {
		family, format string
		write          func(string, uint64) error
		render         func(dir string) (string, error)
		parse          func(string) chat.Parsed
	}{
		{"deepseek-v3.2", "deepseek-v3.2", servertest.WriteDeepSeekV32,
			func(string) (string, error) { return chat.EncodeDeepSeekV32(msgs, tools, chat.Options{Thinking: true}) },
			func(s string) chat.Parsed { p, _ := chat.ParseDeepSeekV32(s, true); return p }},
		{"glm-5", "glm", servertest.WriteGLM5,
			func(dir string) (string, error) {
				tmpl, err := chat.LoadTemplate(dir)
				if err != nil {
					return "", err
				}
				return tmpl.Render(msgs, tools, true, map[string]any{"enable_thinking": true})
			},
			func(s string) chat.Parsed { p, _ := chat.ParseGLM(s, true, tools); return p }},
	} {
		t.Run(tc.family, func(t *testing.T) {
			dir := t.TempDir()
			if err := tc.write(dir, 5); err != nil {
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
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { s.eng.Run(ctx); close(done) }()
			defer func() { cancel(); <-done }()
			hs := httptest.NewServer(s.srv)
			defer hs.Close()

			body, _ := json.Marshal(map[string]any{
				"model": s.name, "messages": msgs, "tools": tools, "max_tokens": 24, "temperature": 0,
				"chat_template_kwargs": map[string]any{"thinking": true},
			})
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
						ToolCalls        []any   `json:"tool_calls"`
					} `json:"message"`
				} `json:"choices"`
				Usage struct {
					PromptTokens int `json:"prompt_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal(raw, &r); err != nil {
				t.Fatal(err)
			}
			prompt, err := tc.render(dir)
			if err != nil {
				t.Fatal(err)
			}
			ids := s.tok.Encode(prompt, true)
			if r.Usage.PromptTokens != len(ids) {
				t.Fatalf("prompt of %d tokens, the %s rendering has %d", r.Usage.PromptTokens, tc.format, len(ids))
			}
			// The same prompt through the engine alone, greedy.
			st, err := s.eng.Submit(context.Background(), engine.Request{Prompt: ids, MaxTokens: 24, Stop: turnEnd(t, s)})
			if err != nil {
				t.Fatal(err)
			}
			toks, _, err := st.Collect(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if toks[len(toks)-1] == s.eng.EOS() || len(turnEnd(t, s)) > 0 && contains(turnEnd(t, s), toks[len(toks)-1]) {
				toks = toks[:len(toks)-1] // the stop token has no text in a reply
			}
			want := tc.parse(s.tok.Decode(toks, true))
			got := r.Choices[0].Message
			content := ""
			if got.Content != nil {
				content = *got.Content
			}
			if content != want.Content || got.ReasoningContent != want.Reasoning || len(got.ToolCalls) != len(want.ToolCalls) {
				t.Fatalf("reply (reasoning %q, content %q, %d calls), the engine's %q read as %#v", got.ReasoningContent, content, len(got.ToolCalls), s.tok.Decode(toks, true), want)
			}
			t.Logf("%s: %d prompt tokens, reply reasoning %q content %q", tc.family, len(ids), got.ReasoningContent, content)
		})
	}
}

// turnEnd is the GLM format's end-of-turn token ids (none for V3.2).
func turnEnd(t *testing.T, s *served) []int32 {
	var ids []int32
	if s.model.Info().Arch != "glm-5" {
		return nil
	}
	for _, m := range chat.GLMEndOfTurn() {
		id, ok := s.tok.TokenID(m)
		if !ok {
			t.Fatalf("no token %q", m)
		}
		ids = append(ids, id)
	}
	return ids
}

func contains(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
