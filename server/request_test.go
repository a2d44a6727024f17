package server

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/strata-inference/strata/tokenizer/chat"
)

// TestStopMatcher: text is returned as soon as it cannot be part of a stop
// string, a stop string split over pieces is still found, and nothing of
// it is ever returned.
func TestStopMatcher(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stops  []string
		pieces []string
		want   []string // output after each piece
		found  int      // index of the piece that finds a stop (-1: none)
		flush  string
	}{
		{"no stops", nil, []string{"ab", "c"}, []string{"ab", "c"}, -1, ""},
		{"plain", []string{"xyz"}, []string{"ab", "cd"}, []string{"ab", "cd"}, -1, ""},
		{"held then released", []string{"xyz"}, []string{"abx", "q"}, []string{"ab", "xq"}, -1, ""},
		{"split over pieces", []string{"xyz"}, []string{"abx", "y", "zzz"}, []string{"ab", "", ""}, 2, ""},
		{"inside one piece", []string{"stop"}, []string{"go stop now"}, []string{"go "}, 0, ""},
		{"earliest of several", []string{"cd", "bc"}, []string{"abcd"}, []string{"a"}, 0, ""},
		{"held at the end", []string{"xyz"}, []string{"abxy"}, []string{"ab"}, -1, "xy"},
		{"longest possible prefix", []string{"aab"}, []string{"aa", "a", "b"}, []string{"", "a", ""}, 3 - 1, ""},
		{"multibyte", []string{"é!"}, []string{"café", "?"}, []string{"caf", "é?"}, -1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := stopMatcher{stops: tc.stops}
			for i, p := range tc.pieces {
				out, found := m.Add(p)
				if out != tc.want[i] || found != (i == tc.found) {
					t.Fatalf("piece %d %q: got %q found %v, want %q found %v", i, p, out, found, tc.want[i], i == tc.found)
				}
				if found {
					return
				}
			}
			if got := m.Flush(); got != tc.flush {
				t.Errorf("flush %q, want %q", got, tc.flush)
			}
		})
	}
}

// TestDecodeThinking: the ways of asking for thinking mode and how they
// combine.
func TestDecodeThinking(t *testing.T) {
	for _, tc := range []struct {
		extra    string
		thinking bool
		effort   string
		bad      bool
	}{
		{``, false, "", false},
		{`,"reasoning_effort":"low"`, true, "high", false},
		{`,"reasoning_effort":"max"`, true, "max", false},
		{`,"reasoning_effort":"none"`, false, "", false},
		{`,"reasoning_effort":"extreme"`, false, "", true},
		{`,"thinking":{"type":"enabled"}`, true, "", false},
		{`,"thinking":{"type":"disabled"},"reasoning_effort":"none"`, false, "", false},
		{`,"thinking":{"type":"maybe"}`, false, "", true},
		{`,"chat_template_kwargs":{"enable_thinking":true}`, true, "", false},
		{`,"chat_template_kwargs":{"thinking":"yes"}`, false, "", true},
		{`,"chat_template_kwargs":{"thinking":false},"thinking":{"type":"enabled"}`, false, "", true},
		{`,"reasoning_effort":"xhigh","thinking":{"type":"enabled"}`, true, "max", false},
	} {
		req, err := decodeChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"x"}]`+tc.extra+`}`), 320)
		if tc.bad {
			if err == nil {
				t.Errorf("%s: accepted", tc.extra)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.extra, err)
			continue
		}
		if req.Chat.Thinking != tc.thinking || req.Chat.ReasoningEffort != tc.effort {
			t.Errorf("%s: thinking %v effort %q, want %v %q", tc.extra, req.Chat.Thinking, req.Chat.ReasoningEffort, tc.thinking, tc.effort)
		}
	}
}

// TestJinjaFormat: a Jinja chat template renders the conversation with the
// generation prompt and the thinking switch, and its replies are plain
// content.
func TestJinjaFormat(t *testing.T) {
	tmpl, err := chat.NewTemplate(`{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<assistant>{% if enable_thinking %}<think>{% endif %}{% endif %}{{ greeting }}`)
	if err != nil {
		t.Fatal(err)
	}
	f := Jinja(tmpl)
	got, err := f.Render(userMsg("hi"), nil, ChatOptions{Thinking: true, TemplateKwargs: map[string]any{"greeting": "!"}})
	if err != nil || got != "<user>hi<assistant><think>!" {
		t.Errorf("rendered %q, %v", got, err)
	}
	p := f.NewReplyParser(ChatOptions{})
	r, c := p.Add("a</think>b")
	r2, c2, calls, err := p.Finish()
	if r+r2 != "" || c+c2 != "a</think>b" || calls != nil || err != nil {
		t.Errorf("parsed %q %q %v %v", r+r2, c+c2, calls, err)
	}
}

// FuzzDecodeChatRequest: decoding never panics, and a request it accepts
// satisfies the invariants the handler relies on; its conversation can be
// rendered (or fails with an error, never a panic).
func FuzzDecodeChatRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"a"}]}],"n":2,"seed":-5,"stop":"x","temperature":0.5,"top_p":0.9,"max_completion_tokens":3}`,
		`{"model":"m","messages":[{"role":"user","content":"w"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c1","content":"r"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":5,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"reasoning_effort":"max","chat_template_kwargs":{"k":[1,{"a":null}]}}`,
		`{"model":"m","messages":[{"role":"developer","content":""}],"stop":["a","b"],"top_k":-1,"min_p":0.1}`,
		`{"model":"m","messages":[]}`, `{`, `null`, `[]`, `{"messages":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, aerr := decodeChatRequest(data, 320)
		if aerr != nil {
			if req != nil || aerr.Status != 400 || aerr.Message == "" || aerr.Type == "" {
				t.Fatalf("rejection %+v with request %v", aerr, req)
			}
			if _, err := json.Marshal(aerr.body()); err != nil {
				t.Fatalf("error body does not encode: %v", err)
			}
			return
		}
		s := req.Sampling
		switch {
		case req.Model == "":
			t.Fatal("accepted without a model")
		case len(req.Messages) == 0:
			t.Fatal("accepted without messages")
		case req.N < 1 || req.N > maxN:
			t.Fatalf("n %d", req.N)
		case req.MaxTokens < 0:
			t.Fatalf("max tokens %d", req.MaxTokens)
		case req.Logprobs < -1 || req.Logprobs > maxTopLogprobs:
			t.Fatalf("logprobs %d", req.Logprobs)
		case len(req.Stop) > maxStops:
			t.Fatalf("%d stops", len(req.Stop))
		case req.IncludeUsage && !req.Stream:
			t.Fatal("include_usage without stream")
		case req.Chat.ReasoningEffort != "" && !req.Chat.Thinking:
			t.Fatal("reasoning effort without thinking")
		case !(s.Temperature >= 0 && s.Temperature <= 2) || math.IsNaN(s.TopP) || s.TopP < 0 || s.TopP > 1:
			t.Fatalf("sampling %+v", s)
		}
		for _, st := range req.Stop {
			if st == "" || len(st) > maxStopBytes {
				t.Fatalf("stop %q", st)
			}
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("accepted sampling the engine refuses: %v", err)
		}
		for _, m := range req.Messages {
			if !strings.Contains(" system developer user assistant tool ", " "+m.Role+" ") {
				t.Fatalf("role %q", m.Role)
			}
		}
		DeepSeekV4().Render(req.Messages, req.Tools, req.Chat)
	})
}

// FuzzDecodeCompletionRequest: likewise for /v1/completions: prompts are
// non-empty and token ids are in the vocabulary.
func FuzzDecodeCompletionRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","prompt":"hi"}`, `{"model":"m","prompt":["a","b"],"n":2,"logprobs":3,"echo":false}`,
		`{"model":"m","prompt":[1,2,3],"max_tokens":5}`, `{"model":"m","prompt":[[1],[2,3]],"best_of":1}`,
		`{"model":"m","prompt":[1,"a"]}`, `{"model":"m","prompt":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, aerr := decodeCompletionRequest(data, 320)
		if aerr != nil {
			if req != nil || aerr.Status != 400 {
				t.Fatalf("rejection %+v", aerr)
			}
			return
		}
		if len(req.Prompts) == 0 || len(req.Prompts) > maxPrompts || req.MaxTokens < 1 {
			t.Fatalf("%d prompts, max tokens %d", len(req.Prompts), req.MaxTokens)
		}
		for _, p := range req.Prompts {
			if p.IsTokens && len(p.Tokens) == 0 {
				t.Fatal("empty token prompt")
			}
			for _, id := range p.Tokens {
				if id < 0 || id >= 320 {
					t.Fatalf("token %d", id)
				}
			}
		}
		if err := req.Sampling.Validate(); err != nil {
			t.Fatal(err)
		}
	})
}
