package chat

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// GLM-5 (and GLM-4.5 to 4.7) render prompts with their Jinja chat template
// (Template; testdata/glm-5/chat_template.jinja is the template this
// package is tested with): "[gMASK]<sop>", turns opened by <|system|>,
// <|user|>, <|assistant|> and <|observation|> (tool results, each in
// <tool_response>), the assistant turn opened with "<think>" (thinking)
// or "</think>" (not), and tool calls written as
//
//	<tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>...</tool_call>
//
// with string values as they are and other values as JSON. ParseGLM and
// GLMStreamParser read the model's reply back.

// Markers of GLM's output.
const (
	glmToolCall    = "<tool_call>"
	glmToolCallEnd = "</tool_call>"
	glmArgKey      = "<arg_key>"
	glmArgKeyEnd   = "</arg_key>"
	glmArgValue    = "<arg_value>"
	glmArgValueEnd = "</arg_value>"
)

// The tokens with which a GLM model ends its turn: the next turn's opener
// (<|user|> after an answer, <|observation|> after tool calls) or
// <|endoftext|>.
const (
	glmUser        = "<|user|>"
	glmObservation = "<|observation|>"
	glmEndOfText   = "<|endoftext|>"
)

// GLMEndOfTurn returns the tokens with which a GLM model ends its turn
// (a server stops generation at them).
func GLMEndOfTurn() []string { return []string{glmUser, glmObservation, glmEndOfText} }

// ErrMalformedGLMToolCalls is wrapped by the errors ParseGLM and
// GLMStreamParser.Finish return for tool calls they cannot read.
var ErrMalformedGLMToolCalls = errors.New("chat: malformed GLM tool calls")

// ParseGLM reads a GLM completion (the text generated after a prompt the
// GLM template rendered) back into reasoning, content and tool calls.
// thinking says whether the prompt ended with "<think>".
//
//   - The completion ends at the first end-of-turn token (GLMEndOfTurn),
//     if any.
//   - In thinking mode the reasoning runs up to the first "</think>", or
//     up to a "<tool_call>" that comes before any (all of it when there is
//     neither).
//   - The content runs from there up to the first "<tool_call>", where the
//     tool calls begin: one or more <tool_call> elements, with only white
//     space between and after them.
//   - Reasoning and content are trimmed of surrounding white space, as the
//     template trims them when it renders a reply.
//   - A call's name is the text after <tool_call> (trimmed); each argument
//     is an <arg_key>/<arg_value> pair. A value becomes the JSON its
//     parameter's type in tools makes of it (see the Qwen3.5 parser);
//     without a type, JSON text is kept as JSON and other text is a
//     string. Arguments is a JSON object in Python's json.dumps style.
//
// If the tool calls are malformed, the error wraps ErrMalformedGLMToolCalls
// and the returned Parsed holds everything after the reasoning, trimmed, as
// Content and no tool calls.
func ParseGLM(completion string, thinking bool, tools []Tool) (Parsed, error) {
	text := completion[:glmEnd(completion)]
	var p Parsed
	if thinking {
		i := strings.Index(text, tokThinkEnd)
		j := strings.Index(text, glmToolCall)
		switch {
		case j >= 0 && (i < 0 || j < i):
			p.Reasoning, text = strings.TrimSpace(text[:j]), text[j:]
		case i >= 0:
			p.Reasoning, text = strings.TrimSpace(text[:i]), text[i+len(tokThinkEnd):]
		default:
			p.Reasoning = strings.TrimSpace(text)
			return p, nil
		}
	}
	i := strings.Index(text, glmToolCall)
	if i < 0 {
		p.Content = strings.TrimSpace(text)
		return p, nil
	}
	calls, err := parseGLMToolCalls(text[i:], tools)
	if err != nil {
		p.Content = strings.TrimSpace(text)
		return p, err
	}
	p.Content, p.ToolCalls = strings.TrimSpace(text[:i]), calls
	return p, nil
}

// glmEnd is where the completion ends: its first end-of-turn token, or
// its length.
func glmEnd(s string) int {
	end := len(s)
	for _, m := range [...]string{glmUser, glmObservation, glmEndOfText} {
		if i := strings.Index(s[:end], m); i >= 0 {
			end = i
		}
	}
	return end
}

// parseGLMToolCalls reads the tool calls from the first <tool_call> to the
// end of the completion.
func parseGLMToolCalls(block string, tools []Tool) ([]ToolCall, error) {
	r := glmReader{s: block}
	var calls []ToolCall
	for {
		r.skipSpace()
		if r.s == "" {
			break
		}
		if !r.take(glmToolCall) {
			return nil, r.fail("want " + glmToolCall + " or the end")
		}
		call, err := r.call(tools)
		if err != nil {
			return nil, err
		}
		calls = append(calls, call)
	}
	return calls, nil
}

// glmReader consumes GLM tool calls from the front.
type glmReader struct {
	s   string
	off int
}

func (r *glmReader) fail(what string) error {
	near := r.s
	if len(near) > 40 {
		near = near[:40] + "…"
	}
	return fmt.Errorf("%w: at byte %d: %s, have %q", ErrMalformedGLMToolCalls, r.off, what, near)
}

func (r *glmReader) advance(n int) { r.s, r.off = r.s[n:], r.off+n }

func (r *glmReader) take(prefix string) bool {
	if !strings.HasPrefix(r.s, prefix) {
		return false
	}
	r.advance(len(prefix))
	return true
}

func (r *glmReader) skipSpace() {
	r.advance(len(r.s) - len(strings.TrimLeftFunc(r.s, unicode.IsSpace)))
}

// until consumes and returns the text up to the next sep, consuming sep.
func (r *glmReader) until(sep string) (string, bool) {
	i := strings.Index(r.s, sep)
	if i < 0 {
		return "", false
	}
	v := r.s[:i]
	r.advance(i + len(sep))
	return v, true
}

// call reads one call after its <tool_call>, through </tool_call>.
func (r *glmReader) call(tools []Tool) (ToolCall, error) {
	end := len(r.s)
	for _, m := range []string{glmArgKey, glmToolCallEnd} {
		if i := strings.Index(r.s, m); i >= 0 && i < end {
			end = i
		}
	}
	name := strings.TrimSpace(r.s[:end])
	if name == "" || end == len(r.s) {
		return ToolCall{}, r.fail("want a tool name and its arguments")
	}
	r.advance(end)
	types := paramTypes(tools, name)
	var args strings.Builder
	args.WriteByte('{')
	seen := map[string]bool{}
	for {
		r.skipSpace()
		if r.take(glmToolCallEnd) {
			break
		}
		if !r.take(glmArgKey) {
			return ToolCall{}, r.fail("want " + glmArgKey + " or " + glmToolCallEnd)
		}
		key, ok := r.until(glmArgKeyEnd)
		if !ok {
			return ToolCall{}, r.fail("unterminated " + glmArgKey)
		}
		key = strings.TrimSpace(key)
		r.skipSpace()
		if !r.take(glmArgValue) {
			return ToolCall{}, r.fail("want " + glmArgValue + " after key " + key)
		}
		value, ok := r.until(glmArgValueEnd)
		if !ok {
			return ToolCall{}, r.fail("unterminated value of " + key)
		}
		if seen[key] {
			return ToolCall{}, r.fail("duplicate argument " + key)
		}
		seen[key] = true
		if len(seen) > 1 {
			args.WriteString(", ")
		}
		writePyString(&args, key)
		args.WriteString(": ")
		if typ, ok := types[key]; ok {
			args.WriteString(typedArgument(value, typ))
		} else if j, err := parseJSON([]byte(strings.TrimSpace(value))); err == nil && strings.TrimSpace(value) != "" {
			args.WriteString(pyJSON(j))
		} else {
			writePyString(&args, value)
		}
	}
	args.WriteByte('}')
	return ToolCall{Name: name, Arguments: args.String()}, nil
}

// GLMStreamParser reads a GLM completion as it is generated: reasoning
// deltas first, then content deltas, then the tool calls when the stream
// ends. It never emits part of a marker ("</think>", "<tool_call>", an
// end-of-turn token), nor white space that may turn out to be leading or
// trailing (ParseGLM trims it), nor part of a UTF-8 sequence. The deltas
// of Add and Finish add up to the Reasoning and Content ParseGLM returns
// for the whole completion, and Finish returns that same Parsed and error.
// A GLMStreamParser is not safe for concurrent use.
type GLMStreamParser struct {
	tools   []Tool
	phase   streamPhase
	ended   bool            // an end-of-turn token was seen
	started bool            // the current phase has emitted text
	buf     string          // text of the current phase not yet returned
	block   strings.Builder // phaseToolCalls: the text from the first <tool_call>
	gap     string          // white space held back before the tool calls
	result  Parsed
	err     error
}

// NewGLMStreamParser returns a parser for one completion; thinking and
// tools are as for ParseGLM.
func NewGLMStreamParser(thinking bool, tools []Tool) *GLMStreamParser {
	p := &GLMStreamParser{tools: tools, phase: phaseContent}
	if thinking {
		p.phase = phaseReasoning
	}
	return p
}

// Add consumes the next piece of the completion and returns the reasoning
// and content that are now certain.
func (p *GLMStreamParser) Add(text string) (reasoningDelta, contentDelta string) {
	if p.ended || p.phase == phaseFinished || text == "" {
		return "", ""
	}
	if p.phase == phaseToolCalls {
		p.addBlock(text)
		return "", ""
	}
	p.buf += text
	if p.phase == phaseReasoning {
		i, stop := firstOf(p.buf, tokThinkEnd, glmToolCall)
		e := glmEnd(p.buf)
		switch {
		case e < len(p.buf) && (i < 0 || e <= i):
			reasoningDelta = p.final(e)
			p.buf, p.ended = "", true
		case i < 0:
			reasoningDelta = p.partial(safeEnd(p.buf, tokThinkEnd, glmToolCall, glmUser, glmObservation, glmEndOfText))
		case stop == glmToolCall:
			reasoningDelta = p.final(i)
			p.startBlock()
		default:
			reasoningDelta = p.final(i)
			p.buf = p.buf[len(tokThinkEnd):]
			p.phase, p.started = phaseContent, false
		}
		p.result.Reasoning += reasoningDelta
		if p.phase != phaseContent || p.ended {
			return reasoningDelta, ""
		}
	}
	i := strings.Index(p.buf, glmToolCall)
	e := glmEnd(p.buf)
	switch {
	case e < len(p.buf) && (i < 0 || e <= i):
		contentDelta = p.final(e)
		p.buf, p.ended = "", true
	case i < 0:
		contentDelta = p.partial(safeEnd(p.buf, glmToolCall, glmUser, glmObservation, glmEndOfText))
	default:
		contentDelta = p.final(i)
		p.startBlock()
	}
	p.result.Content += contentDelta
	return reasoningDelta, contentDelta
}

// partial emits what of buf[:end] is certain: leading white space of the
// phase is dropped, trailing white space held back.
func (p *GLMStreamParser) partial(end int) string {
	if !p.started {
		n := len(p.buf[:end]) - len(strings.TrimLeftFunc(p.buf[:end], unicode.IsSpace))
		p.buf, end = p.buf[n:], end-n
	}
	s := strings.TrimRightFunc(p.buf[:end], unicode.IsSpace)
	if s != "" {
		p.started = true
	}
	p.buf = p.buf[len(s):]
	return s
}

// final ends the phase at buf[end]: it emits buf[:end] trimmed (its
// leading white space only when the phase has emitted nothing yet), keeps
// the trailing white space in gap (the fallback content needs it) and
// leaves buf at end.
func (p *GLMStreamParser) final(end int) string {
	seg := p.buf[:end]
	if !p.started {
		seg = strings.TrimLeftFunc(seg, unicode.IsSpace)
	}
	d := strings.TrimRightFunc(seg, unicode.IsSpace)
	p.gap, p.buf = seg[len(d):], p.buf[end:]
	if d != "" {
		p.started = true
	}
	return d
}

// startBlock moves buf, which starts with <tool_call>, into the block.
func (p *GLMStreamParser) startBlock() {
	p.phase = phaseToolCalls
	rest := p.buf
	p.buf = ""
	p.addBlock(rest)
}

func (p *GLMStreamParser) addBlock(text string) {
	p.block.WriteString(text)
	if s := p.block.String(); glmEnd(s) < len(s) {
		p.block.Reset()
		p.block.WriteString(s[:glmEnd(s)])
		p.ended = true
	}
}

// Finish ends the completion. It returns the text Add held back and the
// whole reply as ParseGLM reads it, with its error (on which the deltas
// carry the fallback content).
func (p *GLMStreamParser) Finish() (reasoningDelta, contentDelta string, result Parsed, err error) {
	switch p.phase {
	case phaseReasoning:
		reasoningDelta = p.partial(len(p.buf))
		p.result.Reasoning += reasoningDelta
	case phaseContent:
		contentDelta = p.partial(len(p.buf))
		p.result.Content += contentDelta
	case phaseToolCalls:
		block := p.block.String()
		p.result.ToolCalls, p.err = parseGLMToolCalls(block, p.tools)
		if p.err != nil {
			contentDelta = strings.TrimRightFunc(block, unicode.IsSpace)
			if p.result.Content != "" {
				contentDelta = p.gap + contentDelta
			}
			p.result.Content += contentDelta
		}
		p.block.Reset()
	}
	p.phase = phaseFinished
	return reasoningDelta, contentDelta, p.result, p.err
}

// firstOf returns the index of the first of the markers in s and which it
// is (-1 and "" when none).
func firstOf(s string, markers ...string) (int, string) {
	at, which := -1, ""
	for _, m := range markers {
		if i := strings.Index(s, m); i >= 0 && (at < 0 || i < at) {
			at, which = i, m
		}
	}
	return at, which
}
