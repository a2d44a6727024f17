package server

import (
	"github.com/strata-inference/strata/grammar"
	"github.com/strata-inference/strata/tokenizer/chat"
)

// DeepSeekV32 is DeepSeek-V3.2's own chat encoding (chat.EncodeDeepSeekV32),
// with replies read by chat.NewDeepSeekV32StreamParser: reasoning up to
// </think> in thinking mode, content, and DSML function_calls blocks.
func DeepSeekV32() ChatFormat { return deepSeekV32{} }

type deepSeekV32 struct{}

func (deepSeekV32) Name() string { return "deepseek-v3.2" }

func (deepSeekV32) Render(msgs []chat.Message, tools []chat.Tool, opt ChatOptions) (string, error) {
	if opt.ReasoningEffort == "high" {
		opt.ReasoningEffort = "" // DeepSeek-V3.2 has one effort; "high" asks for no more than it
	}
	return chat.EncodeDeepSeekV32(msgs, tools, chat.Options{Thinking: opt.Thinking, ReasoningEffort: opt.ReasoningEffort, KeepReasoning: opt.KeepReasoning})
}

func (deepSeekV32) NewReplyParser(opt ChatOptions) ReplyParser {
	return dsv4Parser{chat.NewDeepSeekV32StreamParser(opt.Thinking)}
}

// GLM renders prompts with a GLM model's Jinja chat template (as Jinja
// does, enable_thinking set to the request's thinking switch) and reads
// replies with chat.GLMStreamParser: reasoning up to </think>, content,
// and <tool_call> elements. Its replies end (EndMarkers) at <|user|>,
// <|observation|> and <|endoftext|>.
func GLM(t *chat.Template) ChatFormat { return glmFormat{jinjaFormat{t}} }

type glmFormat struct{ jinjaFormat }

func (glmFormat) Name() string { return "glm" }

func (glmFormat) NewReplyParser(opt ChatOptions) ReplyParser {
	return &glmParser{p: chat.NewGLMStreamParser(opt.Thinking, opt.Tools)}
}

func (glmFormat) ReplyEndMarkers() []string { return chat.GLMEndOfTurn() }

type glmParser struct{ p *chat.GLMStreamParser }

func (p *glmParser) Add(text string) (string, string) { return p.p.Add(text) }

func (p *glmParser) Finish() (string, string, []chat.ToolCall, error) {
	r, c, res, err := p.p.Finish()
	return r, c, res.ToolCalls, err
}

// deepSeekV32 and glmFormat are toolGrammarFormats (structured.go).

func (deepSeekV32) replyPrefix(opt ChatOptions) grammar.Expr {
	if opt.Thinking {
		return chat.DeepSeekV32Reasoning()
	}
	return nil
}

func (deepSeekV32) replyContent() grammar.Expr { return chat.DeepSeekV4Content() } // the same DSML tags and EOS

func (deepSeekV32) toolCallsGrammar(g chat.ToolCallGrammar) (grammar.Expr, error) {
	return chat.DeepSeekV32ToolCallBlock(g)
}

func (glmFormat) replyPrefix(opt ChatOptions) grammar.Expr {
	if opt.Thinking {
		return chat.GLMReasoning()
	}
	return nil
}

func (glmFormat) replyContent() grammar.Expr { return chat.GLMContent() }

func (glmFormat) toolCallsGrammar(g chat.ToolCallGrammar) (grammar.Expr, error) {
	return chat.GLMToolCallBlock(g)
}

// The formats with a tool grammar.
var (
	_ toolGrammarFormat = deepSeekV32{}
	_ toolGrammarFormat = glmFormat{}
)
