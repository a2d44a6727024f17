package chat

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrMalformedToolCalls is wrapped by the errors ParseDeepSeekV4 and
// StreamParser.Finish return for a tool-call block they cannot read.
var ErrMalformedToolCalls = errors.New("chat: malformed DSML tool calls")

// Parsed is an assistant reply read back from the model's output.
type Parsed struct {
	// Reasoning is the text of the thinking block (thinking mode only).
	Reasoning string
	// Content is the answer.
	Content string
	// ToolCalls are the calls the reply makes, IDs left empty.
	ToolCalls []ToolCall
}

// ParseDeepSeekV4 reads a DeepSeek-V4 completion, the text the model
// generated after the prompt EncodeDeepSeekV4 made, back into reasoning,
// content and tool calls. thinking says whether the prompt ended with
// <think> (thinking mode) rather than </think>.
//
// The completion is read as follows.
//   - It ends at the first EOS token "<｜end▁of▁sentence｜>", if any;
//     whatever follows is ignored, and the EOS may be absent.
//   - In thinking mode, the reasoning runs up to the first "</think>". If
//     there is none (the output was cut short), all of it is reasoning. A
//     tool-call block "<｜DSML｜tool_calls>" that begins before any
//     "</think>" ends the reasoning too: the model called a tool without
//     closing its thinking, and the call is read as a call (with one "\n\n"
//     before it as its separator), the content being empty. The reference
//     parser leaves such a call inside the reasoning, unread.
//   - The content runs from there up to the first "<｜DSML｜", where the
//     tool-call block begins; one "\n\n" just before the block is the
//     block's separator, not content.
//   - The block is "<｜DSML｜tool_calls>", any number of invoke elements, and
//     "</｜DSML｜tool_calls>", as EncodeDeepSeekV4 writes them; blank space
//     between elements is free, and only blank space may follow the block.
//     A parameter with string="true" has its text as a JSON string value;
//     one with string="false" holds JSON text, kept as written, or, if the
//     text is not valid JSON, taken as a string. Each call's Arguments is
//     a JSON object in Python's json.dumps style, parameters in order.
//
// If the block is malformed (unknown or unclosed elements, a duplicate
// parameter, trailing text), the error wraps ErrMalformedToolCalls and the
// returned Parsed holds, as a fallback, everything after the reasoning as
// Content and no tool calls.
func ParseDeepSeekV4(completion string, thinking bool) (Parsed, error) {
	return parseDSMLReply(completion, thinking, v4Calls)
}

// callsBlock names a DSML tool-call block: DeepSeek-V4's "tool_calls" or
// DeepSeek-V3.2's "function_calls"; the elements inside are the same.
type callsBlock string

const (
	v4Calls  callsBlock = "tool_calls"
	v32Calls callsBlock = "function_calls"
)

func (c callsBlock) open() string  { return "<" + dsml + string(c) + ">" }
func (c callsBlock) close() string { return "</" + dsml + string(c) + ">" }

// parseDSMLReply is ParseDeepSeekV4 for a tool-call block named calls.
func parseDSMLReply(completion string, thinking bool, calls callsBlock) (Parsed, error) {
	text := completion
	if i := strings.Index(text, tokEOS); i >= 0 {
		text = text[:i]
	}
	var p Parsed
	if thinking {
		i := strings.Index(text, tokThinkEnd)
		if j := strings.Index(text, calls.open()); j >= 0 && (i < 0 || j < i) {
			p.Reasoning = strings.TrimSuffix(text[:j], "\n\n")
			tc, err := parseDSMLToolCalls(text[j:], calls)
			if err != nil {
				p.Content = text[len(p.Reasoning):]
				return p, err
			}
			p.ToolCalls = tc
			return p, nil
		}
		if i < 0 {
			p.Reasoning = text
			return p, nil
		}
		p.Reasoning, text = text[:i], text[i+len(tokThinkEnd):]
	}
	i := strings.Index(text, dsmlStart)
	if i < 0 {
		p.Content = text
		return p, nil
	}
	tc, err := parseDSMLToolCalls(text[i:], calls)
	if err != nil {
		p.Content = text
		return p, err
	}
	p.Content = strings.TrimSuffix(text[:i], "\n\n")
	p.ToolCalls = tc
	return p, nil
}

// parseDSMLToolCalls reads a complete tool-call block named c.
func parseDSMLToolCalls(block string, c callsBlock) ([]ToolCall, error) {
	r := dsmlReader{s: block}
	if !r.take(c.open()) {
		return nil, r.fail("want " + c.open())
	}
	var calls []ToolCall
	for {
		r.skipSpace()
		if r.take(c.close()) {
			break
		}
		if !r.take(dsmlInvoke) {
			return nil, r.fail("want " + dsmlInvoke + "…\"> or " + c.close())
		}
		name, ok := r.until("\">")
		if !ok {
			return nil, r.fail("unterminated invoke name")
		}
		call, err := r.invokeBody(name)
		if err != nil {
			return nil, err
		}
		calls = append(calls, call)
	}
	r.skipSpace()
	if r.s != "" {
		return nil, r.fail("text after " + c.close())
	}
	return calls, nil
}

// dsmlReader consumes a DSML block from the front.
type dsmlReader struct {
	s   string
	off int // bytes consumed, for error messages
}

func (r *dsmlReader) fail(what string) error {
	near := r.s
	if len(near) > 40 {
		near = near[:40] + "…"
	}
	return fmt.Errorf("%w: at byte %d: %s, have %q", ErrMalformedToolCalls, r.off, what, near)
}

func (r *dsmlReader) advance(n int) {
	r.s = r.s[n:]
	r.off += n
}

func (r *dsmlReader) take(prefix string) bool {
	if !strings.HasPrefix(r.s, prefix) {
		return false
	}
	r.advance(len(prefix))
	return true
}

// until consumes and returns the text up to the next sep, consuming sep.
func (r *dsmlReader) until(sep string) (string, bool) {
	i := strings.Index(r.s, sep)
	if i < 0 {
		return "", false
	}
	v := r.s[:i]
	r.advance(i + len(sep))
	return v, true
}

func (r *dsmlReader) skipSpace() {
	n := len(r.s) - len(strings.TrimLeft(r.s, " \t\r\n"))
	r.advance(n)
}

// invokeBody reads the parameters of an invoke element through its end tag.
func (r *dsmlReader) invokeBody(name string) (ToolCall, error) {
	var args strings.Builder
	args.WriteByte('{')
	seen := map[string]bool{}
	for {
		r.skipSpace()
		if r.take(dsmlInvokeEnd) {
			break
		}
		if !r.take(dsmlParam) {
			return ToolCall{}, r.fail("want " + dsmlParam + "…\" or " + dsmlInvokeEnd)
		}
		key, ok := r.until("\" string=\"")
		if !ok {
			return ToolCall{}, r.fail("want parameter name and string=\"true|false\"")
		}
		var isString bool
		switch {
		case r.take("true\">"):
			isString = true
		case r.take("false\">"):
		default:
			return ToolCall{}, r.fail("want string=\"true\"> or string=\"false\">")
		}
		value, ok := r.until(dsmlParamEnd)
		if !ok {
			return ToolCall{}, r.fail("unterminated parameter " + key)
		}
		if seen[key] {
			return ToolCall{}, r.fail("duplicate parameter " + key)
		}
		seen[key] = true
		if len(seen) > 1 {
			args.WriteString(", ")
		}
		writePyString(&args, key)
		args.WriteString(": ")
		if v := strings.TrimSpace(value); !isString && v != "" && isJSON(v) {
			args.WriteString(v)
		} else {
			writePyString(&args, value)
		}
	}
	args.WriteByte('}')
	return ToolCall{Name: name, Arguments: args.String()}, nil
}

func isJSON(s string) bool {
	_, err := parseJSON([]byte(s))
	return err == nil
}

// StreamParser reads a DeepSeek-V4 completion as it is generated, for
// streaming replies: reasoning deltas first, then content deltas, then the
// tool calls when the stream ends.
//
// It never emits part of a marker ("</think>", "<｜DSML｜" (in reasoning, the
// whole "<｜DSML｜tool_calls>"), the EOS token, or the "\n\n" before a
// tool-call block): text that could begin one is held back until it is
// decided. Nor does it split a UTF-8 sequence: an
// incomplete one at the end of the input is held back too.
//
// The concatenation of all the deltas returned by Add and Finish equals the
// Reasoning and Content that ParseDeepSeekV4 returns for the whole
// completion, and Finish returns that same Parsed and error. A StreamParser
// is not safe for concurrent use.
type StreamParser struct {
	calls  callsBlock // the tool-call block's name
	phase  streamPhase
	ended  bool            // an EOS token was seen; later input is ignored
	buf    string          // text of the current phase not yet returned
	block  strings.Builder // phaseToolCalls: the block from "<｜DSML｜"
	gap    string          // the "\n\n" cut off before the tool-call block
	result Parsed          // what has been returned so far
	err    error           // Finish's error
}

type streamPhase uint8

const (
	phaseReasoning streamPhase = iota
	phaseContent
	phaseToolCalls
	phaseFinished
)

// NewStreamParser returns a parser for one completion; thinking is as for
// ParseDeepSeekV4.
func NewStreamParser(thinking bool) *StreamParser { return newStreamParser(thinking, v4Calls) }

func newStreamParser(thinking bool, calls callsBlock) *StreamParser {
	p := &StreamParser{calls: calls, phase: phaseContent}
	if thinking {
		p.phase = phaseReasoning
	}
	return p
}

// Add consumes the next piece of the completion and returns the reasoning
// and content that are now certain. Both are non-empty only when text
// crosses "</think>".
func (p *StreamParser) Add(text string) (reasoningDelta, contentDelta string) {
	if p.ended || p.phase == phaseFinished || text == "" {
		return "", ""
	}
	if p.phase == phaseToolCalls {
		from := p.block.Len() - len(tokEOS) + 1
		p.block.WriteString(text)
		p.cutAtEOS(from)
		return "", ""
	}
	p.buf += text
	if p.phase == phaseReasoning {
		i, eos := firstMarker(p.buf, tokThinkEnd)
		if j := strings.Index(p.buf, p.calls.open()); j >= 0 && (i < 0 || j < i) {
			// A tool call without </think>: the reasoning ends at the block.
			reasoningDelta = p.startBlock(j)
			p.result.Reasoning += reasoningDelta
			return reasoningDelta, ""
		}
		switch {
		case i < 0:
			reasoningDelta = p.emit(safeEnd(p.buf, tokThinkEnd, tokEOS, p.calls.open(), "\n\n"+p.calls.open()))
		case eos:
			reasoningDelta = p.emit(i)
			p.buf, p.ended = "", true
		default:
			reasoningDelta = p.emit(i)
			p.phase, p.buf = phaseContent, p.buf[len(tokThinkEnd):]
		}
		p.result.Reasoning += reasoningDelta
		if p.phase == phaseReasoning || p.ended {
			return reasoningDelta, ""
		}
	}
	i, eos := firstMarker(p.buf, dsmlStart)
	switch {
	case i < 0:
		contentDelta = p.emit(safeEnd(p.buf, dsmlStart, "\n\n"+dsmlStart, tokEOS))
	case eos:
		contentDelta = p.emit(i)
		p.buf, p.ended = "", true
	default:
		contentDelta = p.startBlock(i)
	}
	p.result.Content += contentDelta
	return reasoningDelta, contentDelta
}

// startBlock ends the current phase at the tool-call block that begins at
// buf[i] and returns the text before it, less the "\n\n" separator.
func (p *StreamParser) startBlock(i int) string {
	end := i
	if strings.HasSuffix(p.buf[:i], "\n\n") {
		end = i - 2
	}
	d := p.emit(end)
	p.gap = p.buf[:i-end]
	p.block.WriteString(p.buf[i-end:])
	p.phase, p.buf = phaseToolCalls, ""
	p.cutAtEOS(0)
	return d
}

// Finish ends the completion. It returns the text Add held back, as final
// deltas, and the whole reply as ParseDeepSeekV4 reads it, with its error
// (on which the deltas carry the fallback content). Later calls return
// empty deltas and the same reply.
func (p *StreamParser) Finish() (reasoningDelta, contentDelta string, result Parsed, err error) {
	switch p.phase {
	case phaseReasoning:
		reasoningDelta = p.emit(len(p.buf))
		p.result.Reasoning += reasoningDelta
	case phaseContent:
		contentDelta = p.emit(len(p.buf))
		p.result.Content += contentDelta
	case phaseToolCalls:
		block := p.block.String()
		p.result.ToolCalls, p.err = parseDSMLToolCalls(block, p.calls)
		if p.err != nil {
			contentDelta = p.gap + block
			p.result.Content += contentDelta
		}
		p.block.Reset()
	}
	p.phase = phaseFinished
	return reasoningDelta, contentDelta, p.result, p.err
}

// emit returns buf[:end] and drops it from buf.
func (p *StreamParser) emit(end int) string {
	d := p.buf[:end]
	p.buf = p.buf[end:]
	return d
}

// cutAtEOS ends the tool-call block at an EOS token found from byte from.
func (p *StreamParser) cutAtEOS(from int) {
	from = max(from, 0)
	s := p.block.String()
	if i := strings.Index(s[from:], tokEOS); i >= 0 {
		p.block.Reset()
		p.block.WriteString(s[:from+i])
		p.ended = true
	}
}

// firstMarker finds the first of marker and the EOS token in s. It returns
// the index (or -1) and whether it is the EOS.
func firstMarker(s, marker string) (int, bool) {
	m := strings.Index(s, marker)
	e := strings.Index(s, tokEOS)
	switch {
	case e >= 0 && (m < 0 || e < m):
		return e, true
	case m >= 0:
		return m, false
	}
	return -1, false
}

// safeEnd returns how much of s, which holds no complete marker, may be
// emitted: all but the longest suffix that could begin one of the markers,
// and not an incomplete UTF-8 sequence at the end.
func safeEnd(s string, markers ...string) int {
	end := len(s)
	for _, m := range markers {
		for n := min(len(m)-1, len(s)); n > 0; n-- {
			if strings.HasSuffix(s, m[:n]) {
				end = min(end, len(s)-n)
				break
			}
		}
	}
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
