package chat

import "strings"

// Gemma4StreamParser reads a Gemma 4 completion as it is generated, for
// streaming replies: reasoning deltas, content deltas, and the tool calls
// when the stream ends. It never emits markup: text that could begin a
// marker is held back until it is decided, and so is white space that may
// turn out to be trailing and an incomplete UTF-8 sequence.
//
// The concatenation of the deltas Add and Finish return equals the
// Reasoning and Content ParseGemma4 returns for the whole completion, and
// Finish returns that same Parsed and error. It reads the completion so
// far again at every Add (the format's markers decide what came before
// them), so a reply of n bytes costs O(n²) in all; replies are short next
// to the model's work per token. A Gemma4StreamParser is not safe for
// concurrent use.
type Gemma4StreamParser struct {
	thinking bool
	text     strings.Builder
	out      Parsed // what has been returned so far
	ended    bool   // an end marker was seen; later input is ignored
	finished bool
	result   Parsed
	err      error
}

// NewGemma4StreamParser returns a parser for one completion; thinking is as
// for ParseGemma4.
func NewGemma4StreamParser(thinking bool) *Gemma4StreamParser {
	return &Gemma4StreamParser{thinking: thinking}
}

// Add consumes the next piece of the completion and returns the reasoning
// and content that are now certain.
func (p *Gemma4StreamParser) Add(text string) (reasoningDelta, contentDelta string) {
	if p.ended || p.finished || text == "" {
		return "", ""
	}
	p.text.WriteString(text)
	now, ended, _ := scanGemma4(p.text.String(), p.thinking, false)
	p.ended = ended
	return p.advance(now)
}

// advance returns what now holds beyond what was returned.
func (p *Gemma4StreamParser) advance(now Parsed) (string, string) {
	r := strings.TrimPrefix(now.Reasoning, p.out.Reasoning)
	c := strings.TrimPrefix(now.Content, p.out.Content)
	if len(now.Reasoning) < len(p.out.Reasoning) || len(r)+len(p.out.Reasoning) != len(now.Reasoning) {
		r = "" // cannot happen: what is certain stays a prefix
	}
	if len(now.Content) < len(p.out.Content) || len(c)+len(p.out.Content) != len(now.Content) {
		c = ""
	}
	p.out.Reasoning += r
	p.out.Content += c
	return r, c
}

// Finish ends the completion. It returns the text Add held back, as final
// deltas, and the whole reply as ParseGemma4 reads it, with its error.
// Later calls return empty deltas and the same reply.
func (p *Gemma4StreamParser) Finish() (reasoningDelta, contentDelta string, result Parsed, err error) {
	if p.finished {
		return "", "", p.result, p.err
	}
	p.finished = true
	p.result, p.err = ParseGemma4(p.text.String(), p.thinking)
	reasoningDelta, contentDelta = p.advance(p.result)
	return reasoningDelta, contentDelta, p.result, p.err
}
