package server

import (
	"strings"

	"github.com/strata-inference/strata/grammar"
	"github.com/strata-inference/strata/tokenizer/chat"
)

// MiniMax renders prompts with a MiniMax chat template (Jinja, as
// transformers does with add_generation_prompt) and reads replies in
// MiniMax's markup (chat.ParseMiniMax): reasoning up to </think>, content,
// and <minimax:tool_call> blocks as OpenAI tool calls typed by the
// request's tool schemas; replies stop at [e~[. Whether a reply starts
// inside the reasoning is read off the template's generation prompt (the
// MiniMax templates open <think> there), for thinking on and off.
func MiniMax(t *chat.Template) ChatFormat {
	f := miniMaxFormat{jinjaFormat: jinjaFormat{t}, opens: map[bool]bool{}}
	for _, thinking := range []bool{false, true} {
		p, err := f.Render([]chat.Message{{Role: chat.RoleUser, Content: "probe"}}, nil, ChatOptions{Thinking: thinking})
		f.opens[thinking] = err == nil && strings.HasSuffix(strings.TrimRight(p, " \n"), "<think>") || err != nil && thinking
	}
	return f
}

type miniMaxFormat struct {
	jinjaFormat
	// opens[thinking]: the generation prompt ends inside <think>.
	opens map[bool]bool
}

func (miniMaxFormat) Name() string { return "minimax" }

// ReplyEndMarkers implements EndMarkers.
func (miniMaxFormat) ReplyEndMarkers() []string { return chat.MiniMaxEndOfTurn() }

func (f miniMaxFormat) NewReplyParser(opt ChatOptions) ReplyParser {
	return f.NewToolReplyParser(opt, nil)
}

// NewToolReplyParser implements ToolReplyFormat.
func (f miniMaxFormat) NewToolReplyParser(opt ChatOptions, tools []chat.Tool) ReplyParser {
	return miniMaxParser{chat.NewMiniMaxStreamParser(f.opens[opt.Thinking], tools)}
}

type miniMaxParser struct{ p *chat.MiniMaxStreamParser }

func (p miniMaxParser) Add(text string) (string, string) { return p.p.Add(text) }

func (p miniMaxParser) Finish() (string, string, []chat.ToolCall, error) {
	r, c, res, err := p.p.Finish()
	return r, c, res.ToolCalls, err
}

// A constrained MiniMax reply (structured.go) starts, when the prompt
// opened <think> (MiniMax's templates do, thinking or not), with the
// reasoning, free up to "</think>"; the answer after it is content.
func (f miniMaxFormat) replyPrefix(opt ChatOptions) grammar.Expr {
	if f.opens[opt.Thinking] {
		return chat.MiniMaxReasoning()
	}
	return nil
}

var _ prefixGrammarFormat = miniMaxFormat{}
