package server

import (
	"fmt"

	"github.com/strata-inference/strata/grammar"
	"github.com/strata-inference/strata/tokenizer/chat"
)

// Gemma4 renders prompts with Gemma 4's Jinja chat template (the
// checkpoint's chat_template.jinja, as transformers' apply_chat_template
// does with add_generation_prompt; enable_thinking is the request's
// thinking switch) and reads replies with chat.Gemma4StreamParser:
// reasoning in the thought channel, content, and tool calls in Gemma's
// notation made OpenAI tool calls. Whether a reply starts inside the
// thought channel is found once, by rendering a probe conversation with
// thinking on and off: templates differ there.
func Gemma4(t *chat.Template) (ChatFormat, error) {
	f := gemma4Format{t: t, inThought: map[bool]bool{}}
	for _, thinking := range []bool{false, true} {
		p, err := f.Render([]chat.Message{{Role: chat.RoleUser, Content: "probe"}}, nil, ChatOptions{Thinking: thinking})
		if err != nil {
			return nil, fmt.Errorf("server: the Gemma 4 chat template: %w", err)
		}
		f.inThought[thinking] = chat.Gemma4InThought(p)
	}
	return f, nil
}

type gemma4Format struct {
	t *chat.Template
	// inThought[thinking]: the generation prompt ends inside the thought
	// channel.
	inThought map[bool]bool
}

func (gemma4Format) Name() string { return "gemma4" }

// ReplyEndMarkers implements EndMarkers: the end of the turn, and the
// start of a tool response, which the model leaves to the caller.
func (gemma4Format) ReplyEndMarkers() []string { return chat.Gemma4EndMarkers() }

// MarkupIsSpecial implements SpecialMarkup: Gemma's tokenizer holds
// <|channel>, <|tool_call> and the rest as special tokens.
func (gemma4Format) MarkupIsSpecial() bool { return true }

func (f gemma4Format) Render(msgs []chat.Message, tools []chat.Tool, opt ChatOptions) (string, error) {
	extra := map[string]any{"enable_thinking": opt.Thinking}
	for k, v := range opt.TemplateKwargs {
		extra[k] = v
	}
	return f.t.Render(msgs, tools, true, extra)
}

func (f gemma4Format) NewReplyParser(opt ChatOptions) ReplyParser {
	return gemma4Parser{chat.NewGemma4StreamParser(f.inThought[opt.Thinking])}
}

type gemma4Parser struct{ p *chat.Gemma4StreamParser }

func (p gemma4Parser) Add(text string) (string, string) { return p.p.Add(text) }

func (p gemma4Parser) Finish() (string, string, []chat.ToolCall, error) {
	r, c, res, err := p.p.Finish()
	return r, c, res.ToolCalls, err
}

// A constrained Gemma 4 reply (structured.go) starts with the thought
// channel, free up to its close "<channel|>" (a special token the
// grammar's vocabulary then holds): required when the prompt left the
// channel open, optional (the reply may open it) in thinking mode
// otherwise. The answer after it is content.
func (f gemma4Format) replyPrefix(opt ChatOptions) grammar.Expr {
	switch {
	case f.inThought[opt.Thinking]:
		return chat.Gemma4Reasoning(false)
	case opt.Thinking:
		return grammar.Optional(chat.Gemma4Reasoning(true))
	}
	return nil
}

func (gemma4Format) grammarMarkers() []string { return chat.Gemma4GrammarMarkers() }

var (
	_ prefixGrammarFormat = gemma4Format{}
	_ grammarMarkerFormat = gemma4Format{}
)
