package server

import "github.com/strata-inference/strata/tokenizer/chat"

// Kimi renders prompts with a Kimi model's Jinja chat template (Kimi
// Linear, Kimi-K2: <|im_*|> turns) and reads replies with
// chat.KimiStreamParser: content, then the tool-call section
// (<|tool_calls_section_begin|> ... <|tool_calls_section_end|>) as
// OpenAI tool calls. Kimi's tokenizers hold that markup as special tokens
// (SpecialMarkup), and replies end at <|im_end|> (EndMarkers).
func Kimi(t *chat.Template) ChatFormat { return kimiFormat{jinjaFormat{t}} }

type kimiFormat struct{ jinjaFormat }

func (kimiFormat) Name() string { return "kimi" }

func (kimiFormat) NewReplyParser(ChatOptions) ReplyParser {
	return &kimiParser{p: chat.NewKimiStreamParser()}
}

func (kimiFormat) MarkupIsSpecial() bool { return true }

func (kimiFormat) ReplyEndMarkers() []string { return chat.KimiEndOfTurn() }

type kimiParser struct{ p *chat.KimiStreamParser }

func (p *kimiParser) Add(text string) (string, string) { return "", p.p.Add(text) }

func (p *kimiParser) Finish() (string, string, []chat.ToolCall, error) {
	c, calls, err := p.p.Finish()
	return "", c, calls, err
}
