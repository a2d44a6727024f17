package server

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/strata-inference/strata/tokenizer/chat"
)

// TestMiniMaxFormat: the MiniMax format renders with the template, knows
// its generation prompt opens <think>, stops at [e~[, and reads a streamed
// reply's reasoning, content and typed tool calls.
func TestMiniMaxFormat(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "tokenizer", "chat", "testdata", "minimax-m3", "chat_template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.NewTemplate(string(src))
	if err != nil {
		t.Fatal(err)
	}
	f := MiniMax(tmpl)
	if f.Name() != "minimax" || !slices.Equal(f.(EndMarkers).ReplyEndMarkers(), []string{"[e~["}) {
		t.Fatalf("format %s, end markers %v", f.Name(), f.(EndMarkers).ReplyEndMarkers())
	}
	tools := []chat.Tool{{Type: "function", Function: chat.ToolFunction{Name: "add",
		Parameters: []byte(`{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "number"}}}`)}}}
	p := replyParser(f, ChatOptions{}, tools)
	var r, c string
	for _, piece := range []string{"Sum them", ".</thi", "nk>\nCalling.\n<minimax:", "tool_call>\n<invoke name=\"add\">\n<parameter name=\"a\">2</parameter>\n",
		"<parameter name=\"b\">0.5</parameter>\n</invoke>\n</minimax:tool_call>"} {
		dr, dc := p.Add(piece)
		r, c = r+dr, c+dc
	}
	dr, dc, calls, err := p.Finish()
	r, c = r+dr, c+dc
	if err != nil || r != "Sum them." || c != "Calling." || len(calls) != 1 || calls[0].Name != "add" || calls[0].Arguments != `{"a": 2, "b": 0.5}` {
		t.Fatalf("reasoning %q content %q calls %#v err %v", r, c, calls, err)
	}
}
