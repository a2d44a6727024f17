package server

import (
	"github.com/strata-inference/strata/grammar"
	"github.com/strata-inference/strata/tokenizer/chat"
)

// DeepSeekV4 is DeepSeek-V4's own chat encoding (chat.EncodeDeepSeekV4),
// with replies read by chat.StreamParser: reasoning up to </think> in
// thinking mode, content, and DSML tool calls.
func DeepSeekV4() ChatFormat { return deepSeekV4{} }

type deepSeekV4 struct{}

func (deepSeekV4) Name() string { return "deepseek-v4" }

func (deepSeekV4) Render(msgs []chat.Message, tools []chat.Tool, opt ChatOptions) (string, error) {
	return chat.EncodeDeepSeekV4(msgs, tools, chat.Options{Thinking: opt.Thinking, ReasoningEffort: opt.ReasoningEffort, KeepReasoning: opt.KeepReasoning})
}

func (deepSeekV4) NewReplyParser(opt ChatOptions) ReplyParser {
	return dsv4Parser{chat.NewStreamParser(opt.Thinking)}
}

type dsv4Parser struct{ p *chat.StreamParser }

func (p dsv4Parser) Add(text string) (string, string) { return p.p.Add(text) }

func (p dsv4Parser) Finish() (string, string, []chat.ToolCall, error) {
	r, c, res, err := p.p.Finish()
	return r, c, res.ToolCalls, err
}

func (deepSeekV4) replyPrefix(opt ChatOptions) grammar.Expr {
	if opt.Thinking {
		return chat.DeepSeekV4Reasoning()
	}
	return nil
}

func (deepSeekV4) replyContent() grammar.Expr { return chat.DeepSeekV4Content() }

func (deepSeekV4) toolCallsGrammar(g chat.ToolCallGrammar) (grammar.Expr, error) {
	return chat.DeepSeekV4ToolCallBlock(g)
}

var _ toolGrammarFormat = deepSeekV4{}
