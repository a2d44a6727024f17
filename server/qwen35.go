package server

import (
	"github.com/strata-inference/strata/grammar"
	"github.com/strata-inference/strata/tokenizer/chat"
)

// Qwen35 renders prompts with a Qwen model's Jinja chat template (Qwen3.5's,
// or Qwen3's), as Jinja does, and reads replies with
// chat.Qwen35StreamParser: in thinking mode the reasoning up to "</think>",
// then content, then tool calls, each in Qwen3.5's XML form
// (<function=NAME><parameter=KEY>) or Qwen3's JSON form, their arguments
// typed by the request's tool schemas.
func Qwen35(t *chat.Template) ChatFormat { return qwen35Format{jinjaFormat{t}} }

type qwen35Format struct{ jinjaFormat }

func (qwen35Format) Name() string { return "qwen3.5" }

func (f qwen35Format) NewReplyParser(opt ChatOptions) ReplyParser {
	return f.NewToolReplyParser(opt, nil)
}

// NewToolReplyParser implements ToolReplyFormat.
func (qwen35Format) NewToolReplyParser(opt ChatOptions, tools []chat.Tool) ReplyParser {
	return qwen35Parser{chat.NewQwen35StreamParser(opt.Thinking, tools)}
}

type qwen35Parser struct{ p *chat.Qwen35StreamParser }

func (p qwen35Parser) Add(text string) (string, string) { return p.p.Add(text) }

func (p qwen35Parser) Finish() (string, string, []chat.ToolCall, error) {
	r, c, res, err := p.p.Finish()
	return r, c, res.ToolCalls, err
}

// Qwen3.5's replies can be constrained (structured.go): in thinking mode
// the reasoning is free up to "</think>" and the blank line after it,
// content is free text without "<tool_call>", and forced or strict tool
// calls are written in the template's XML form (chat.Qwen35ToolCalls).

func (qwen35Format) replyPrefix(opt ChatOptions) grammar.Expr {
	if opt.Thinking {
		return chat.Qwen35Reasoning()
	}
	return nil
}

func (qwen35Format) replyContent() grammar.Expr { return chat.Qwen35Content() }

func (qwen35Format) toolCallsGrammar(g chat.ToolCallGrammar) (grammar.Expr, error) {
	return chat.Qwen35ToolCalls(g)
}

var _ toolGrammarFormat = qwen35Format{}
