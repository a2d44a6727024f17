package chat

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MiniMax's reply markup (MiniMax-M2's format, which the MiniMax-M3 chat
// template follows): reasoning up to </think>, tool calls in a
// <minimax:tool_call> block of <invoke name="..."> elements with one
// <parameter name="..."> each per argument, and [e~[ ending the turn.
const (
	miniMaxThinkStart = "<think>"
	miniMaxThinkEnd   = "</think>"
	miniMaxToolCall   = "<minimax:tool_call>"
	miniMaxToolEnd    = "</minimax:tool_call>"
	miniMaxInvoke     = "<invoke name=\""
	miniMaxInvokeEnd  = "</invoke>"
	miniMaxParam      = "<parameter name=\""
	miniMaxParamEnd   = "</parameter>"
	miniMaxEndOfTurn  = "[e~["
)

// MiniMaxEndOfTurn is the marker that ends a MiniMax turn.
func MiniMaxEndOfTurn() []string { return []string{miniMaxEndOfTurn} }

// ErrMalformedMiniMaxToolCalls is wrapped by ParseMiniMax's error when a
// <minimax:tool_call> block cannot be read.
var ErrMalformedMiniMaxToolCalls = errors.New("chat: malformed MiniMax tool calls")

// ParseMiniMax reads a MiniMax completion (the text after the generation
// prompt, up to an end of turn): in thinking mode the reasoning up to
// </think> (a leading <think> dropped), then the content, then the tool
// calls of a <minimax:tool_call> block. Reasoning and content are trimmed
// of surrounding white space. Arguments become a JSON object whose values
// are typed by the tool's parameter schema (strings stay strings; numbers,
// booleans, objects and arrays parse as JSON), keys in order of
// appearance. A malformed block gives an error wrapping
// ErrMalformedMiniMaxToolCalls and, as a fallback, everything after the
// reasoning as content and no calls.
func ParseMiniMax(completion string, thinking bool, tools []Tool) (Parsed, error) {
	p, block, rest := miniMaxSplit(completion, thinking, true)
	if block == "" {
		return p, nil
	}
	calls, err := parseMiniMaxToolCalls(block, tools)
	if err != nil {
		p.Content = strings.TrimSpace(rest)
		return p, err
	}
	p.ToolCalls = calls
	return p, nil
}

// miniMaxSplit returns the reasoning and content of completion that are
// certain (all of them when final; otherwise without a suffix that could
// still begin a marker or turn out to be trailing white space) and the
// tool-call block from its marker on ("" when there is none yet), and the
// text after the reasoning.
func miniMaxSplit(completion string, thinking, final bool) (p Parsed, block, rest string) {
	text := completion
	if i := strings.Index(text, miniMaxEndOfTurn); i >= 0 {
		text, final = text[:i], true
	}
	if thinking {
		body := strings.TrimLeftFunc(text, unicode.IsSpace)
		switch {
		case strings.HasPrefix(body, miniMaxThinkStart):
			body = body[len(miniMaxThinkStart):]
		case !final && strings.HasPrefix(miniMaxThinkStart, body):
			return p, "", "" // may still become <think>
		}
		i := strings.Index(body, miniMaxThinkEnd)
		if i < 0 {
			if !final {
				body = body[:miniMaxSafeEnd(body, miniMaxThinkEnd)]
			}
			p.Reasoning = strings.TrimSpace(body)
			return p, "", ""
		}
		p.Reasoning = strings.TrimSpace(body[:i])
		text = body[i+len(miniMaxThinkEnd):]
	}
	rest = text
	j := strings.Index(text, miniMaxToolCall)
	if j < 0 {
		if !final {
			text = text[:miniMaxSafeEnd(text, miniMaxToolCall)]
		}
		p.Content = strings.TrimSpace(text)
		return p, "", rest
	}
	p.Content = strings.TrimSpace(text[:j])
	return p, text[j:], rest
}

// miniMaxSafeEnd is how much of s (which holds neither marker nor an end
// of turn) is certain: not a suffix that could begin marker or the end of
// turn, not trailing white space, not an incomplete UTF-8 sequence.
func miniMaxSafeEnd(s, marker string) int {
	end := len(s)
	for _, m := range []string{marker, miniMaxEndOfTurn} {
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

// parseMiniMaxToolCalls reads a complete <minimax:tool_call> block (or
// several).
func parseMiniMaxToolCalls(block string, tools []Tool) ([]ToolCall, error) {
	r := qwenReader{s: block}
	fail := func(what string) error { return fmt.Errorf("%w: %v", ErrMalformedMiniMaxToolCalls, r.fail(what)) }
	var calls []ToolCall
	for {
		r.skipSpace()
		if r.s == "" {
			break
		}
		if !r.take(miniMaxToolCall) {
			return nil, fail("want " + miniMaxToolCall + " or the end")
		}
		for {
			r.skipSpace()
			if r.take(miniMaxToolEnd) {
				break
			}
			if !r.take(miniMaxInvoke) {
				return nil, fail("want " + miniMaxInvoke + "…\"> or " + miniMaxToolEnd)
			}
			name, ok := r.until("\">")
			if !ok || strings.TrimSpace(name) == "" {
				return nil, fail("want a tool name and \">")
			}
			types := paramTypes(tools, name)
			var args strings.Builder
			args.WriteByte('{')
			seen := map[string]bool{}
			for {
				r.skipSpace()
				if r.take(miniMaxInvokeEnd) {
					break
				}
				if !r.take(miniMaxParam) {
					return nil, fail("want " + miniMaxParam + "…\"> or " + miniMaxInvokeEnd)
				}
				key, ok := r.until("\">")
				if !ok || key == "" {
					return nil, fail("want a parameter name and \">")
				}
				value, ok := r.until(miniMaxParamEnd)
				if !ok {
					return nil, fail("unterminated parameter " + key)
				}
				if seen[key] {
					return nil, fail("duplicate parameter " + key)
				}
				seen[key] = true
				if len(seen) > 1 {
					args.WriteString(", ")
				}
				writePyString(&args, key)
				args.WriteString(": ")
				args.WriteString(typedArgument(strings.TrimSuffix(strings.TrimPrefix(value, "\n"), "\n"), types[key]))
			}
			args.WriteByte('}')
			calls = append(calls, ToolCall{Name: name, Arguments: args.String()})
		}
	}
	return calls, nil
}

// MiniMaxStreamParser reads a MiniMax completion as it is generated, for
// streaming replies: reasoning deltas, then content deltas, then the tool
// calls when the stream ends. It never emits markup or text that may still
// turn out to be markup or trailing white space; the concatenation of its
// deltas equals what ParseMiniMax returns for the whole completion, and
// Finish returns that same Parsed and error. It is not safe for
// concurrent use.
type MiniMaxStreamParser struct {
	thinking bool
	tools    []Tool
	text     strings.Builder
	sent     Parsed // what has been returned
	done     bool
	result   Parsed
	err      error
}

// NewMiniMaxStreamParser returns a parser for one completion; thinking and
// tools are as for ParseMiniMax.
func NewMiniMaxStreamParser(thinking bool, tools []Tool) *MiniMaxStreamParser {
	return &MiniMaxStreamParser{thinking: thinking, tools: tools}
}

// Add consumes the next piece of the completion and returns the reasoning
// and content that are now certain.
func (p *MiniMaxStreamParser) Add(text string) (reasoningDelta, contentDelta string) {
	if p.done || text == "" {
		return "", ""
	}
	p.text.WriteString(text)
	cur, _, _ := miniMaxSplit(p.text.String(), p.thinking, false)
	return p.advance(cur)
}

// advance returns what cur adds to what has been sent (cur extends it).
func (p *MiniMaxStreamParser) advance(cur Parsed) (string, string) {
	var r, c string
	if strings.HasPrefix(cur.Reasoning, p.sent.Reasoning) {
		r = cur.Reasoning[len(p.sent.Reasoning):]
	}
	if strings.HasPrefix(cur.Content, p.sent.Content) {
		c = cur.Content[len(p.sent.Content):]
	}
	p.sent.Reasoning += r
	p.sent.Content += c
	return r, c
}

// Finish ends the completion: it returns the text Add held back and the
// whole reply as ParseMiniMax reads it, with its error. Later calls return
// empty deltas and the same reply.
func (p *MiniMaxStreamParser) Finish() (reasoningDelta, contentDelta string, result Parsed, err error) {
	if p.done {
		return "", "", p.result, p.err
	}
	p.done = true
	p.result, p.err = ParseMiniMax(p.text.String(), p.thinking, p.tools)
	reasoningDelta, contentDelta = p.advance(p.result)
	return reasoningDelta, contentDelta, p.result, p.err
}
