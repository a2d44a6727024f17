package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Kimi's chat markup (Kimi-K2 and Kimi Linear instruct templates): turns
// end at <|im_end|>; an assistant turn's tool calls follow its content in
// one section,
//
//	<|tool_calls_section_begin|>
//	<|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{JSON}<|tool_call_end|>
//	...
//	<|tool_calls_section_end|>
const (
	kimiEnd          = "<|im_end|>"
	kimiSectionBegin = "<|tool_calls_section_begin|>"
	kimiSectionEnd   = "<|tool_calls_section_end|>"
	kimiCallBegin    = "<|tool_call_begin|>"
	kimiArgBegin     = "<|tool_call_argument_begin|>"
	kimiCallEnd      = "<|tool_call_end|>"
)

// KimiEndOfTurn are the markers a Kimi reply stops at.
func KimiEndOfTurn() []string { return []string{kimiEnd} }

// ErrMalformedKimiToolCalls is wrapped by the errors ParseKimi returns for a
// tool-call section it cannot read.
var ErrMalformedKimiToolCalls = errors.New("malformed Kimi tool calls")

// ParseKimi reads a Kimi completion (the text after the prompt's
// <|im_assistant|>assistant<|im_middle|>, up to <|im_end|> if present)
// back into content and tool calls: the text before
// <|tool_calls_section_begin|> is the content, trimmed; each call's id is
// functions.NAME:IDX, whose NAME is the function's name, and its
// arguments a JSON object. If the section is malformed, the error wraps
// ErrMalformedKimiToolCalls and the returned Parsed holds the whole
// completion, trimmed, as Content.
func ParseKimi(completion string) (Parsed, error) {
	if i := strings.Index(completion, kimiEnd); i >= 0 {
		completion = completion[:i]
	}
	i := strings.Index(completion, kimiSectionBegin)
	if i < 0 {
		return Parsed{Content: strings.TrimSpace(completion)}, nil
	}
	p := Parsed{Content: strings.TrimSpace(completion[:i])}
	calls, err := kimiCalls(completion[i+len(kimiSectionBegin):])
	if err != nil {
		return Parsed{Content: strings.TrimSpace(completion)}, err
	}
	p.ToolCalls = calls
	return p, nil
}

func kimiCalls(s string) ([]ToolCall, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrMalformedKimiToolCalls, fmt.Sprintf(format, args...))
	}
	var calls []ToolCall
	for {
		s = strings.TrimSpace(s)
		if rest, ok := strings.CutPrefix(s, kimiSectionEnd); ok {
			if strings.TrimSpace(rest) != "" {
				return nil, bad("text after the tool-call section: %.40q", rest)
			}
			return calls, nil
		}
		rest, ok := strings.CutPrefix(s, kimiCallBegin)
		if !ok {
			return nil, bad("want %s or %s at %.40q", kimiCallBegin, kimiSectionEnd, s)
		}
		id, rest, ok := strings.Cut(rest, kimiArgBegin)
		if !ok {
			return nil, bad("a call without %s", kimiArgBegin)
		}
		args, rest, ok := strings.Cut(rest, kimiCallEnd)
		if !ok {
			return nil, bad("a call without %s", kimiCallEnd)
		}
		id = strings.TrimSpace(id)
		name := strings.TrimPrefix(id, "functions.")
		if k := strings.LastIndex(name, ":"); k >= 0 {
			name = name[:k]
		}
		if name == "" {
			return nil, bad("call id %q names no function", id)
		}
		args = strings.TrimSpace(args)
		var obj map[string]any
		if err := json.Unmarshal([]byte(args), &obj); err != nil || obj == nil {
			return nil, bad("arguments of %s are not a JSON object: %.40q", name, args)
		}
		calls = append(calls, ToolCall{Name: name, Arguments: args})
		s = rest
	}
}

// KimiStreamParser reads one Kimi completion as it streams: content is
// released as it becomes certain (a possible start of the tool-call
// section's marker held back), the tool-call section is read at Finish.
type KimiStreamParser struct {
	buf     string // content not yet released
	section strings.Builder
	inCalls bool
	ended   bool
	content strings.Builder
	started bool
}

// NewKimiStreamParser returns a parser for one completion.
func NewKimiStreamParser() *KimiStreamParser { return &KimiStreamParser{} }

// Add consumes the next piece of the completion and returns the content
// that is now certain (leading white space dropped, trailing held back).
func (p *KimiStreamParser) Add(text string) string {
	if p.ended || text == "" {
		return ""
	}
	if p.inCalls {
		p.addSection(text)
		return ""
	}
	p.buf += text
	i, which := firstOf(p.buf, kimiSectionBegin, kimiEnd)
	if i < 0 {
		return p.emit(safeEnd(p.buf, kimiSectionBegin, kimiEnd), false)
	}
	out := p.emit(i, true)
	rest := p.buf[len(which):]
	p.buf = ""
	if which == kimiEnd {
		p.ended = true
		return out
	}
	p.inCalls = true
	p.addSection(rest)
	return out
}

func (p *KimiStreamParser) addSection(text string) {
	p.section.WriteString(text)
	if s := p.section.String(); strings.Contains(s, kimiEnd) {
		p.section.Reset()
		p.section.WriteString(s[:strings.Index(s, kimiEnd)])
		p.ended = true
	}
}

// emit releases buf[:end] (final: everything, else its trailing white
// space held back) and keeps the rest.
func (p *KimiStreamParser) emit(end int, final bool) string {
	s := p.buf[:end]
	if !p.started {
		s = strings.TrimLeft(s, " \t\r\n")
	}
	var cut int
	if !final {
		cut = len(strings.TrimRight(s, " \t\r\n"))
	} else {
		s = strings.TrimRight(s, " \t\r\n")
		cut = len(s)
	}
	out := s[:cut]
	p.buf = s[cut:] + p.buf[end:]
	if out != "" {
		p.started = true
	}
	p.content.WriteString(out)
	return out
}

// Finish ends the completion: it returns the content Add held back and the
// tool calls. If the section is malformed, the error wraps
// ErrMalformedKimiToolCalls and the section's text is returned as content.
func (p *KimiStreamParser) Finish() (content string, calls []ToolCall, err error) {
	if !p.inCalls {
		rest := strings.TrimRight(p.buf, " \t\r\n")
		if !p.started {
			rest = strings.TrimLeft(rest, " \t\r\n")
		}
		p.buf = ""
		return rest, nil, nil
	}
	calls, err = kimiCalls(p.section.String())
	if err != nil {
		text := kimiSectionBegin + p.section.String()
		if p.content.Len() > 0 {
			text = "\n" + text
		}
		return text, nil, err
	}
	return "", calls, nil
}
