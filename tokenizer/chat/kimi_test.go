package chat

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestParseKimi: content before the tool-call section, every call's name
// from its functions.NAME:IDX id and its JSON arguments; a malformed
// section is reported and leaves the completion as content.
func TestParseKimi(t *testing.T) {
	for _, tc := range []struct {
		in      string
		content string
		calls   []ToolCall
		bad     bool
	}{
		{in: "  Sunny in Paris. <|im_end|>", content: "Sunny in Paris."},
		{in: "Checking.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|>" +
			"<|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|><|im_end|>",
			content: "Checking.", calls: []ToolCall{{Name: "get_weather", Arguments: `{"city": "Paris"}`}, {Name: "get_time", Arguments: `{}`}}},
		{in: "<|tool_calls_section_begin|>\n<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{\"a\": [1]}<|tool_call_end|>\n<|tool_calls_section_end|>",
			calls: []ToolCall{{Name: "f", Arguments: `{"a": [1]}`}}},
		{in: "x<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>[1]<|tool_call_end|><|tool_calls_section_end|>", bad: true},
		{in: "x<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0{}", bad: true},
		{in: "x<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}<|tool_call_end|>", bad: true},
	} {
		got, err := ParseKimi(tc.in)
		if tc.bad {
			if !errors.Is(err, ErrMalformedKimiToolCalls) || len(got.ToolCalls) != 0 || got.Content == "" {
				t.Errorf("%q: %+v, %v; want a malformed-calls error", tc.in, got, err)
			}
			continue
		}
		if err != nil || got.Content != tc.content || !slices.Equal(got.ToolCalls, tc.calls) {
			t.Errorf("%q: %+v, %v; want content %q, calls %+v", tc.in, got, err, tc.content, tc.calls)
		}
		// Streamed in random pieces, the parser gives the same.
		rng := rand.New(rand.NewPCG(1, uint64(len(tc.in))))
		for range 20 {
			p := NewKimiStreamParser()
			var content string
			for s := tc.in; s != ""; {
				n := 1 + rng.IntN(min(len(s), 9))
				content += p.Add(s[:n])
				s = s[n:]
			}
			rest, calls, err := p.Finish()
			content += rest
			if err != nil || content != tc.content || !slices.Equal(calls, tc.calls) {
				t.Fatalf("%q streamed: content %q, calls %+v, %v", tc.in, content, calls, err)
			}
		}
	}
}
