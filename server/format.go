package server

import (
	"github.com/strata-inference/strata/tokenizer/chat"
)

// ChatOptions are the per-request choices that shape a chat prompt.
type ChatOptions struct {
	// Thinking selects thinking mode: the reply reasons first.
	Thinking bool
	// ReasoningEffort is "", "high" or "max" (DeepSeek-V4's levels).
	ReasoningEffort string
	// TemplateKwargs are the request's chat_template_kwargs other than the
	// thinking switches; Jinja templates see them as variables.
	TemplateKwargs map[string]any
	// KeepReasoning renders earlier assistant turns with their reasoning
	// even where the format would drop it (DeepSeek-V4 in thinking mode
	// without tools): a continued stored response is shown as it was
	// generated.
	KeepReasoning bool
	// Tools are the request's tools, for reply parsers that type tool-call
	// arguments by their schemas (set by the server, not by requests).
	Tools []chat.Tool
}

// ChatFormat turns a conversation into prompt text and the model's reply
// back into reasoning, content and tool calls. Implementations must be safe
// for concurrent use.
type ChatFormat interface {
	// Name identifies the format in logs ("deepseek-v4", "jinja").
	Name() string
	// Render returns the prompt for msgs and tools, ending where the
	// assistant's reply begins. The prompt is tokenized with special tokens
	// recognised.
	Render(msgs []chat.Message, tools []chat.Tool, opt ChatOptions) (string, error)
	// NewReplyParser returns a parser for one reply to a prompt Render made
	// with opt.
	NewReplyParser(opt ChatOptions) ReplyParser
}

// SpecialMarkup is a ChatFormat whose markup (tool-call and reasoning
// delimiters) tokenizers keep as special tokens: chat replies in it are
// decoded with special tokens kept, whatever skip_special_tokens says, for
// its parser to read and remove.
type SpecialMarkup interface {
	MarkupIsSpecial() bool
}

// EndMarkers is a ChatFormat whose replies end at markers the tokenizer
// holds as single tokens (Gemma 4's <turn|>, and <|tool_response>, where
// the model waits for its tools' results): every reply stops at them as
// at EOS.
type EndMarkers interface {
	ReplyEndMarkers() []string
}

// ToolReplyFormat is a ChatFormat whose replies are read knowing the
// request's tools (their parameter schemas type the arguments of the tool
// calls it parses); the server uses NewToolReplyParser instead of
// NewReplyParser for such formats.
type ToolReplyFormat interface {
	ChatFormat
	NewToolReplyParser(opt ChatOptions, tools []chat.Tool) ReplyParser
}

// replyParser is f's parser for one reply to a request with these tools.
func replyParser(f ChatFormat, opt ChatOptions, tools []chat.Tool) ReplyParser {
	if tf, ok := f.(ToolReplyFormat); ok {
		return tf.NewToolReplyParser(opt, tools)
	}
	return f.NewReplyParser(opt)
}

// ReplyParser reads one reply as it is generated.
type ReplyParser interface {
	// Add consumes the next piece of the reply and returns the reasoning and
	// content that are now certain.
	Add(text string) (reasoning, content string)
	// Finish ends the reply: it returns the text Add held back and the tool
	// calls the reply made. A non-nil error means the tool calls could not
	// be read; the reply's text is then all content.
	Finish() (reasoning, content string, calls []chat.ToolCall, err error)
}

// Jinja renders prompts with a model's Jinja chat template, as
// transformers' apply_chat_template does with add_generation_prompt. The
// template sees enable_thinking and thinking set to the request's thinking
// switch, and the request's other chat_template_kwargs. Replies are read as
// plain content: no reasoning and no tool calls.
func Jinja(t *chat.Template) ChatFormat { return jinjaFormat{t} }

type jinjaFormat struct{ t *chat.Template }

func (jinjaFormat) Name() string { return "jinja" }

func (f jinjaFormat) Render(msgs []chat.Message, tools []chat.Tool, opt ChatOptions) (string, error) {
	extra := map[string]any{"enable_thinking": opt.Thinking, "thinking": opt.Thinking}
	for k, v := range opt.TemplateKwargs {
		extra[k] = v
	}
	return f.t.Render(msgs, tools, true, extra)
}

func (jinjaFormat) NewReplyParser(ChatOptions) ReplyParser { return &plainParser{} }

// plainParser passes the reply through as content.
type plainParser struct{}

func (*plainParser) Add(text string) (string, string) { return "", text }

func (*plainParser) Finish() (string, string, []chat.ToolCall, error) { return "", "", nil, nil }
