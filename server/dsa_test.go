package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/engine"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/model/deepseekv32"
	"github.com/strata-inference/strata/model/glm5"
	"github.com/strata-inference/strata/server/servertest"
	"github.com/strata-inference/strata/tokenizer"
	"github.com/strata-inference/strata/tokenizer/chat"
)

// dsaServer serves a synthetic DeepSeek-V3.2 or GLM-5 (random weights) in
// the family's chat format. force, when set, makes every request generate
// that text (then the model's EOS) whatever the model would: the path from
// generated tokens to the response is what is tested, not the model.
type dsaServer struct {
	srv *Server
	eng *engine.Engine
	tok *tokenizer.Tokenizer
	url string
}

func newDSAServer(t *testing.T, family string) *dsaServer {
	t.Helper()
	dir := filepath.Join(t.TempDir(), family)
	var m model.Model
	var format ChatFormat
	var err error
	switch family {
	case "deepseek-v3.2":
		if err = servertest.WriteDeepSeekV32(dir, 3); err == nil {
			m, err = deepseekv32.Load(dir, cpu.New(2), model.Options{})
		}
		format = DeepSeekV32()
	case "glm-5":
		if err = servertest.WriteGLM5(dir, 3); err == nil {
			m, err = glm5.Load(dir, cpu.New(2), model.Options{})
		}
		if err == nil {
			var tmpl *chat.Template
			if tmpl, err = chat.LoadTemplate(dir); err == nil {
				format = GLM(tmpl)
			}
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	specs := m.CacheSpecs()
	eng, err := engine.New(m, engine.Config{Pages: 4 * cache.TotalPages(specs, 4096, cache.PageBytesFor(specs)), EOS: m.Info().EOS, MaxContext: 4096})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(eng, tok, format, Options{ModelName: "strata-test", KeepAlive: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { eng.Run(ctx); close(done) }()
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); cancel(); <-done; m.Close() })
	return &dsaServer{srv: srv, eng: eng, tok: tok, url: hs.URL}
}

func (d *dsaServer) force(text string) {
	toks := append(d.tok.Encode(text, true), d.eng.EOS())
	d.srv.submitHook = func(r *engine.Request) { r.Forced = toks }
}

type dsaReply struct {
	Choices []struct {
		Message struct {
			Content          *string `json:"content"`
			ReasoningContent string  `json:"reasoning_content"`
			ToolCalls        []struct {
				Function struct{ Name, Arguments string } `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

func (d *dsaServer) chat(t *testing.T, thinking bool, extra ...any) dsaReply {
	t.Helper()
	req := map[string]any{
		"model": "strata-test", "messages": []map[string]string{{"role": "user", "content": "Weather in Paris?"}},
		"tools":                []map[string]any{{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string", "maxLength": 12}, "days": map[string]any{"type": "integer", "minimum": 1, "maximum": 7}}, "required": []string{"city", "days"}}}}},
		"chat_template_kwargs": map[string]any{"thinking": thinking},
	}
	for i := 0; i+1 < len(extra); i += 2 {
		req[extra[i].(string)] = extra[i+1]
	}
	body, _ := json.Marshal(req)
	resp, err := http.Post(d.url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	var r dsaReply
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestDeepSeekV32ToolCalls: a DeepSeek-V3.2 reply with reasoning and a
// DSML function_calls block becomes reasoning_content and tool_calls.
func TestDeepSeekV32ToolCalls(t *testing.T) {
	d := newDSAServer(t, "deepseek-v3.2")
	d.force("I need the weather.</think>Let me check.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n" +
		"<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">2</｜DSML｜parameter>\n" +
		"</｜DSML｜invoke>\n</｜DSML｜function_calls>")
	r := d.chat(t, true)
	c, m := r.Choices[0], r.Choices[0].Message
	if c.FinishReason != "tool_calls" || m.ReasoningContent != "I need the weather." || m.Content == nil || *m.Content != "Let me check." ||
		len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "get_weather" || m.ToolCalls[0].Function.Arguments != `{"city": "Paris", "days": 2}` {
		t.Fatalf("reply %+v", r)
	}
}

// TestDSAToolChoice: tool_choice "required" constrains the random model of
// either family, thinking or not, to its family's tool-call syntax (a DSML
// function_calls block; GLM's <tool_call> elements) calling the tool with
// arguments of its schema (one call: parallel_tool_calls false), which
// comes back as a tool call.
func TestDSAToolChoice(t *testing.T) {
	for _, family := range []string{"deepseek-v3.2", "glm-5"} {
		d := newDSAServer(t, family)
		for _, thinking := range []bool{false, true} {
			r := d.chat(t, thinking, "tool_choice", "required", "parallel_tool_calls", false, "max_tokens", 600, "temperature", 0)
			m := r.Choices[0].Message
			if r.Choices[0].FinishReason != "tool_calls" || len(m.ToolCalls) != 1 {
				t.Fatalf("%s, thinking=%v: finish %q, content %q", family, thinking, r.Choices[0].FinishReason, deref(m.Content))
			}
			for _, c := range m.ToolCalls {
				var args struct {
					City *string `json:"city"`
					Days *int    `json:"days"`
				}
				if c.Function.Name != "get_weather" || json.Unmarshal([]byte(c.Function.Arguments), &args) != nil || args.City == nil || args.Days == nil {
					t.Fatalf("%s, thinking=%v: call %s(%s)", family, thinking, c.Function.Name, c.Function.Arguments)
				}
			}
			t.Logf("%s, thinking=%v: %d reasoning bytes, %s(%s)", family, thinking, len(m.ReasoningContent), m.ToolCalls[0].Function.Name, m.ToolCalls[0].Function.Arguments)
		}
	}
}

// TestGLMToolCalls: a GLM reply with reasoning and a <tool_call> becomes
// reasoning_content and tool_calls typed by the tool's schema, and the
// generation ends at <|observation|>, GLM's end of a tool-calling turn,
// which the engine's EOS is not: what the model would write after it is
// not generated.
func TestGLMToolCalls(t *testing.T) {
	d := newDSAServer(t, "glm-5")
	reply := "I need the weather.</think>Let me check.<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>" +
		"<arg_key>days</arg_key><arg_value>2</arg_value></tool_call><|observation|>"
	d.force(reply + "<tool_response>made up</tool_response>")
	r := d.chat(t, true)
	c, m := r.Choices[0], r.Choices[0].Message
	if c.FinishReason != "tool_calls" || m.ReasoningContent != "I need the weather." || m.Content == nil || *m.Content != "Let me check." ||
		len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "get_weather" || m.ToolCalls[0].Function.Arguments != `{"city": "Paris", "days": 2}` {
		t.Fatalf("reply %+v", r)
	}
	if want := len(d.tok.Encode(reply, true)); r.Usage.CompletionTokens != want {
		t.Fatalf("%d tokens generated; the reply up to <|observation|> is %d", r.Usage.CompletionTokens, want)
	}
	// Without thinking, the prompt closes the reasoning and a plain answer
	// ends at <|user|>.
	d.force("Sunny, 20 degrees.<|user|>and more")
	r = d.chat(t, false)
	if m := r.Choices[0].Message; m.Content == nil || *m.Content != "Sunny, 20 degrees." || m.ReasoningContent != "" || r.Choices[0].FinishReason != "stop" {
		t.Fatalf("reply %+v", r)
	}
	if strings.Contains(*r.Choices[0].Message.Content, "<|user|>") {
		t.Fatal("the end-of-turn token leaked into the content")
	}
}
