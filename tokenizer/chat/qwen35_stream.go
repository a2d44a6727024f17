package chat

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Qwen35StreamParser reads a Qwen3.5 completion as it is generated, for
// streaming replies: reasoning deltas first, then content deltas, then the
// tool calls when the stream ends.
//
// It never emits markup: text that could begin a marker ("</think>",
// "<tool_call>", "<|im_end|>", "<|endoftext|>", and a "<think>" repeated
// at the start of the reasoning) is held back until it is decided, and so
// is white space that may turn out to be trailing (ParseQwen35 trims it),
// and an incomplete UTF-8 sequence at the end of the input.
//
// The concatenation of all the deltas returned by Add and Finish equals the
// Reasoning and Content that ParseQwen35 returns for the whole completion,
// and Finish returns that same Parsed and error. A Qwen35StreamParser is not
// safe for concurrent use.
type Qwen35StreamParser struct {
	tools   []Tool
	phase   streamPhase
	ended   bool            // an end-of-turn marker was seen; later input is ignored
	started bool            // the current phase has emitted text (leading space is dropped before)
	opened  bool            // reasoning: a repeated leading "<think>" has been ruled out or dropped
	buf     string          // text of the current phase not yet returned
	block   strings.Builder // phaseToolCalls: the block from the first "<tool_call>"
	gap     string          // white space held before the tool-call block
	result  Parsed          // what has been returned so far
	err     error           // Finish's error
}

// NewQwen35StreamParser returns a parser for one completion; thinking and
// tools are as for ParseQwen35.
func NewQwen35StreamParser(thinking bool, tools []Tool) *Qwen35StreamParser {
	p := &Qwen35StreamParser{tools: tools, phase: phaseContent}
	if thinking {
		p.phase = phaseReasoning
	}
	return p
}

// Add consumes the next piece of the completion and returns the reasoning
// and content that are now certain. Both are non-empty only when text
// crosses "</think>".
func (p *Qwen35StreamParser) Add(text string) (reasoningDelta, contentDelta string) {
	if p.ended || p.phase == phaseFinished || text == "" {
		return "", ""
	}
	if p.phase == phaseToolCalls {
		p.addBlock(text)
		return "", ""
	}
	p.buf += text
	if p.phase == phaseReasoning {
		reasoningDelta = p.reasoning()
		p.result.Reasoning += reasoningDelta
		if p.phase == phaseReasoning || p.ended {
			return reasoningDelta, ""
		}
	}
	contentDelta = p.content()
	p.result.Content += contentDelta
	return reasoningDelta, contentDelta
}

// reasoning advances the reasoning phase over buf.
func (p *Qwen35StreamParser) reasoning() string {
	if !p.opened {
		rest := strings.TrimLeftFunc(p.buf, unicode.IsSpace)
		switch {
		case strings.HasPrefix(rest, qwenThinkStart):
			p.buf, p.opened = rest[len(qwenThinkStart):], true
		case strings.HasPrefix(qwenThinkStart, rest):
			return "" // may still become "<think>"
		default:
			p.opened = true
		}
	}
	i, eos := firstQwenMarker(p.buf, qwenThinkEnd)
	switch {
	case i < 0:
		return p.emit(qwenSafeEnd(p.buf, qwenThinkEnd))
	case eos:
		d := p.emitFinal(i)
		p.buf, p.ended = "", true
		return d
	}
	d := p.emitFinal(i)
	p.phase, p.started, p.buf = phaseContent, false, p.buf[len(qwenThinkEnd):]
	return d
}

// content advances the content phase over buf.
func (p *Qwen35StreamParser) content() string {
	i, eos := firstQwenMarker(p.buf, qwenToolCall)
	switch {
	case i < 0:
		return p.emit(qwenSafeEnd(p.buf, qwenToolCall))
	case eos:
		d := p.emitFinal(i)
		p.buf, p.ended = "", true
		return d
	}
	before := p.buf[:i]
	n := trailingSpace(before)
	d := p.emit(len(before) - n)
	p.gap = p.buf[:n]
	if !p.started {
		p.gap = "" // leading white space, dropped
	}
	rest := p.buf[n:]
	p.phase, p.buf = phaseToolCalls, ""
	p.addBlock(rest)
	return d
}

// addBlock appends to the tool-call block, ending it at an end-of-turn
// marker.
func (p *Qwen35StreamParser) addBlock(text string) {
	from := max(p.block.Len()-len(qwenEndOfText)+1, 0)
	p.block.WriteString(text)
	s := p.block.String()
	if i := qwenEOS(s[from:]); i >= 0 {
		p.block.Reset()
		p.block.WriteString(s[:from+i])
		p.ended = true
	}
}

// Finish ends the completion. It returns the text Add held back, as final
// deltas, and the whole reply as ParseQwen35 reads it, with its error (on
// which the deltas carry the fallback content). Later calls return empty
// deltas and the same reply.
func (p *Qwen35StreamParser) Finish() (reasoningDelta, contentDelta string, result Parsed, err error) {
	switch p.phase {
	case phaseReasoning:
		if !p.opened {
			p.buf = strings.TrimLeftFunc(p.buf, unicode.IsSpace)
			p.buf = strings.TrimPrefix(p.buf, qwenThinkStart)
		}
		reasoningDelta = p.emitFinal(len(p.buf))
		p.result.Reasoning += reasoningDelta
	case phaseContent:
		contentDelta = p.emitFinal(len(p.buf))
		p.result.Content += contentDelta
	case phaseToolCalls:
		block := p.block.String()
		p.result.ToolCalls, p.err = parseQwenToolCalls(block, p.tools)
		if p.err != nil {
			p.result.ToolCalls = nil
			contentDelta = p.gap + strings.TrimRightFunc(block, unicode.IsSpace)
			p.result.Content += contentDelta
		}
		p.block.Reset()
	}
	p.phase, p.buf = phaseFinished, ""
	return reasoningDelta, contentDelta, p.result, p.err
}

// emit returns buf[:end], without white space before the phase's first
// text, and drops it from buf.
func (p *Qwen35StreamParser) emit(end int) string {
	d := p.buf[:end]
	p.buf = p.buf[end:]
	if !p.started {
		d = strings.TrimLeftFunc(d, unicode.IsSpace)
		p.started = d != ""
	}
	return d
}

// emitFinal emits buf[:end] as the phase's last text: trailing white space
// is dropped.
func (p *Qwen35StreamParser) emitFinal(end int) string {
	s := p.buf[:end]
	s = s[:len(s)-trailingSpace(s)]
	d := p.emit(len(s))
	p.buf = p.buf[end-len(s):]
	return d
}

// firstQwenMarker finds the first of marker and the end-of-turn markers in
// s. It returns the index (or -1) and whether it is an end of turn.
func firstQwenMarker(s, marker string) (int, bool) {
	m := strings.Index(s, marker)
	e := qwenEOS(s)
	switch {
	case e >= 0 && (m < 0 || e < m):
		return e, true
	case m >= 0:
		return m, false
	}
	return -1, false
}

// qwenSafeEnd returns how much of s, which holds neither marker nor an end
// of turn, may be emitted: not a suffix that could begin one of them, not
// trailing white space, and not an incomplete UTF-8 sequence.
func qwenSafeEnd(s, marker string) int {
	end := len(s)
	for _, m := range []string{marker, qwenIMEnd, qwenEndOfText} {
		for n := min(len(m)-1, len(s)); n > 0; n-- {
			if strings.HasSuffix(s, m[:n]) {
				end = min(end, len(s)-n)
				break
			}
		}
	}
	end -= trailingSpace(s[:end])
	for k := 1; k < utf8.UTFMax && end-k >= 0; k++ {
		if utf8.RuneStart(s[end-k]) {
			if !utf8.FullRuneInString(s[end-k : end]) {
				end -= k
			}
			break
		}
	}
	return end
}
