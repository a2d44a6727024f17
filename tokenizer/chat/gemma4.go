package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Gemma 4 renders prompts with its Jinja chat template (Template; the
// template of the released checkpoints is in testdata/gemma4): turns are
// "<|turn>ROLE\n...<turn|>\n", the reply starts after "<|turn>model\n", in
// thinking mode inside a thought channel ("<|channel>thought\n"). Tools are
// declared in the system turn and called as
// "<|tool_call>call:NAME{key:value,...}<tool_call|>", strings delimited by
// <|"|>. ParseGemma4 and Gemma4StreamParser read a completion back.

// Markers of Gemma 4's output.
const (
	gemmaTurnEnd      = "<turn|>"
	gemmaEOS          = "<eos>"
	gemmaToolResponse = "<|tool_response>" // the model stops for a tool's result
	gemmaChannel      = "<|channel>"
	gemmaChannelEnd   = "<channel|>"
	gemmaToolCall     = "<|tool_call>"
	gemmaToolCallEnd  = "<tool_call|>"
	gemmaQuote        = `<|"|>`
	gemmaThought      = "thought" // the thought channel's name
)

// gemmaEnds are the markers that end a reply.
var gemmaEnds = []string{gemmaTurnEnd, gemmaEOS, gemmaToolResponse}

// ErrMalformedGemma4ToolCalls is wrapped by the errors ParseGemma4 and
// Gemma4StreamParser.Finish return for tool calls they cannot read.
var ErrMalformedGemma4ToolCalls = errors.New("chat: malformed Gemma 4 tool calls")

// ParseGemma4 reads a Gemma 4 completion, the text generated after a
// prompt its chat template rendered with the generation prompt, back into
// reasoning, content and tool calls. thinking says whether the prompt
// ended inside the thought channel (enable_thinking).
//
// The completion is read as follows.
//   - It ends at the first "<turn|>", "<eos>" or "<|tool_response>" (the
//     model stops there for the tools' results), if any.
//   - The reasoning is the thought channel: in thinking mode from the
//     start, otherwise only when the reply opens one ("<|channel>", then
//     the channel's name "thought" and a newline, both optional), up to
//     "<channel|>" (all of it when there is none: the output was cut
//     short).
//   - The content runs from there to the first "<|tool_call>", where the
//     calls begin: each is "<|tool_call>call:NAME{ARGS}<tool_call|>", white
//     space between them skipped. Text after them is content too (the
//     template renders a turn's content after its calls), joined to the
//     content before them by a blank line.
//   - Reasoning and content are trimmed of surrounding white space, as the
//     template trims them when it renders them back.
//
// ARGS become a JSON object, keys in order: strings are <|"|>...<|"|>,
// nested objects {key:value,...} and arrays [value,...] as written, bare
// true and false booleans, null (or None) null, numbers as JSON numbers,
// any other bare text a string.
//
// If a call is malformed the error wraps ErrMalformedGemma4ToolCalls and
// the returned Parsed holds everything after the reasoning as Content and
// no tool calls.
func ParseGemma4(completion string, thinking bool) (Parsed, error) {
	p, _, err := scanGemma4(completion, thinking, true)
	return p, err
}

// scanGemma4 reads text as ParseGemma4 does. With final false the text is
// a prefix of the completion: the reasoning and content returned are only
// what more text cannot change (no partial marker, no white space that may
// turn out trailing, no incomplete UTF-8 sequence), and ended reports
// whether an end marker was seen (so more text changes nothing).
func scanGemma4(text string, thinking, final bool) (p Parsed, ended bool, err error) {
	if i, _ := firstOf(text, gemmaEnds...); i >= 0 {
		text, ended = text[:i], true
	}
	final = final || ended
	// safe is how much of s more text cannot change, s ending where the
	// text does and markers being what could follow.
	safe := func(s string, markers ...string) string {
		if final {
			return strings.TrimRightFunc(s, unicode.IsSpace)
		}
		return s[:gemmaSafeEnd(s, append(markers, gemmaEnds...)...)]
	}
	rest := strings.TrimLeftFunc(text, unicode.IsSpace)
	if !final && strings.HasPrefix(gemmaChannel, rest) {
		return p, ended, nil // may still open the thought channel
	}
	opened := strings.HasPrefix(rest, gemmaChannel)
	if opened || thinking {
		if opened {
			rest = rest[len(gemmaChannel):]
			label := strings.TrimLeft(rest, " \t")
			if !final && len(label) < len(gemmaThought)+1 && strings.HasPrefix(gemmaThought+"\n", label) {
				return p, ended, nil // may still be the channel's name
			}
			if r, ok := strings.CutPrefix(label, gemmaThought); ok {
				rest = r
			}
		}
		i := strings.Index(rest, gemmaChannelEnd)
		if i < 0 {
			p.Reasoning = strings.TrimLeftFunc(safe(rest, gemmaChannelEnd), unicode.IsSpace)
			return p, ended, nil
		}
		p.Reasoning = strings.TrimSpace(rest[:i])
		rest = rest[i+len(gemmaChannelEnd):]
	}
	after := rest // everything after the reasoning: the fallback content
	i := strings.Index(rest, gemmaToolCall)
	if i < 0 {
		p.Content = strings.TrimLeftFunc(safe(rest, gemmaToolCall), unicode.IsSpace)
		return p, ended, nil
	}
	p.Content = strings.TrimSpace(rest[:i])
	calls, tail, complete, err := parseGemmaCalls(rest[i:], final)
	if err != nil {
		if final {
			p.Content = strings.TrimSpace(after)
			return p, ended, fmt.Errorf("%w: %w", ErrMalformedGemma4ToolCalls, err)
		}
		return p, ended, nil // Finish reports it
	}
	if final {
		p.ToolCalls = calls
	}
	if complete {
		if t := strings.TrimLeftFunc(safe(tail, gemmaToolCall), unicode.IsSpace); t != "" {
			if p.Content != "" {
				p.Content += "\n\n"
			}
			p.Content += t
		}
	}
	return p, ended, nil
}

// parseGemmaCalls reads the calls at the start of block (which starts with
// "<|tool_call>"), up to the first text that is not white space or another
// call: the tail. complete says whether the calls are done (the tail has
// begun); with final false an unfinished call is not an error.
func parseGemmaCalls(block string, final bool) (calls []ToolCall, tail string, complete bool, err error) {
	s := block
	for {
		t := strings.TrimLeftFunc(s, unicode.IsSpace)
		if !strings.HasPrefix(t, gemmaToolCall) {
			if !final && strings.HasPrefix(gemmaToolCall, t) {
				return calls, "", false, nil // white space, or the start of another call
			}
			return calls, s, true, nil
		}
		t = t[len(gemmaToolCall):]
		call, rest, err := parseGemmaCall(t)
		if err != nil {
			if !final && errors.Is(err, errGemmaShort) {
				return calls, "", false, nil
			}
			return nil, "", false, err
		}
		calls = append(calls, call)
		s = rest
	}
}

// errGemmaShort is a call cut short: the text ends inside it.
var errGemmaShort = errors.New("the call is cut short")

// parseGemmaCall reads "call:NAME{ARGS}<tool_call|>" at the start of s.
func parseGemmaCall(s string) (ToolCall, string, error) {
	const call = "call:"
	if !strings.HasPrefix(s, call) {
		if strings.HasPrefix(call, s) {
			return ToolCall{}, "", errGemmaShort
		}
		return ToolCall{}, "", fmt.Errorf("a tool call does not start with %q: %.30q", call, s)
	}
	s = s[len(call):]
	i := strings.IndexByte(s, '{')
	if i < 0 {
		if strings.Contains(s, gemmaToolCallEnd) {
			return ToolCall{}, "", fmt.Errorf("tool call %.30q has no arguments", s)
		}
		return ToolCall{}, "", errGemmaShort
	}
	name := s[:i]
	if name == "" || strings.ContainsFunc(name, func(r rune) bool { return unicode.IsSpace(r) || strings.ContainsRune(`<>{}[]:,"`, r) }) {
		return ToolCall{}, "", fmt.Errorf("tool call name %q", name)
	}
	r := &gemmaArgs{s: s, i: i}
	var args bytes.Buffer
	if err := r.object(&args); err != nil {
		return ToolCall{}, "", err
	}
	rest := s[r.i:]
	if !strings.HasPrefix(rest, gemmaToolCallEnd) {
		if strings.HasPrefix(gemmaToolCallEnd, rest) {
			return ToolCall{}, "", errGemmaShort
		}
		return ToolCall{}, "", fmt.Errorf("tool call %s: %.30q after its arguments, want %q", name, rest, gemmaToolCallEnd)
	}
	return ToolCall{Name: name, Arguments: args.String()}, rest[len(gemmaToolCallEnd):], nil
}

// gemmaArgs reads Gemma 4's argument notation from s at i, writing JSON.
type gemmaArgs struct {
	s     string
	i     int
	depth int
}

// maxGemmaDepth bounds nesting, so that hostile output cannot exhaust the
// stack.
const maxGemmaDepth = 64

func (r *gemmaArgs) space() {
	for r.i < len(r.s) && (r.s[r.i] == ' ' || r.s[r.i] == '\n' || r.s[r.i] == '\t' || r.s[r.i] == '\r') {
		r.i++
	}
}

func (r *gemmaArgs) short() error {
	if r.i >= len(r.s) {
		return errGemmaShort
	}
	return nil
}

// quoted reads <|"|>...<|"|> at r.i.
func (r *gemmaArgs) quoted() (string, error) {
	r.i += len(gemmaQuote)
	j := strings.Index(r.s[r.i:], gemmaQuote)
	if j < 0 {
		return "", errGemmaShort
	}
	v := r.s[r.i : r.i+j]
	r.i += j + len(gemmaQuote)
	return v, nil
}

func (r *gemmaArgs) object(out *bytes.Buffer) error {
	if r.depth++; r.depth > maxGemmaDepth {
		return fmt.Errorf("arguments nested deeper than %d", maxGemmaDepth)
	}
	defer func() { r.depth-- }()
	r.i++ // '{'
	out.WriteByte('{')
	for first := true; ; first = false {
		r.space()
		if err := r.short(); err != nil {
			return err
		}
		if r.s[r.i] == '}' {
			r.i++
			out.WriteByte('}')
			return nil
		}
		if !first {
			if r.s[r.i] != ',' {
				return fmt.Errorf("%.20q in arguments, want ',' or '}'", r.s[r.i:])
			}
			r.i++
			r.space()
			if err := r.short(); err != nil {
				return err
			}
			out.WriteByte(',')
		}
		var key string
		if strings.HasPrefix(r.s[r.i:], gemmaQuote) {
			k, err := r.quoted()
			if err != nil {
				return err
			}
			key = k
		} else {
			j := strings.IndexAny(r.s[r.i:], ":,{}[]")
			if j < 0 {
				return errGemmaShort
			}
			if r.s[r.i+j] != ':' {
				return fmt.Errorf("argument key %.20q has no ':'", r.s[r.i:])
			}
			key = strings.TrimSpace(r.s[r.i : r.i+j])
			r.i += j
		}
		if key == "" {
			return fmt.Errorf("an argument with no key")
		}
		r.space()
		if err := r.short(); err != nil {
			return err
		}
		if r.s[r.i] != ':' {
			return fmt.Errorf("argument key %q is followed by %.20q, want ':'", key, r.s[r.i:])
		}
		r.i++
		writeJSONString(out, key)
		out.WriteByte(':')
		if err := r.value(out, '}'); err != nil {
			return err
		}
	}
}

func (r *gemmaArgs) array(out *bytes.Buffer) error {
	if r.depth++; r.depth > maxGemmaDepth {
		return fmt.Errorf("arguments nested deeper than %d", maxGemmaDepth)
	}
	defer func() { r.depth-- }()
	r.i++ // '['
	out.WriteByte('[')
	for first := true; ; first = false {
		r.space()
		if err := r.short(); err != nil {
			return err
		}
		if r.s[r.i] == ']' {
			r.i++
			out.WriteByte(']')
			return nil
		}
		if !first {
			if r.s[r.i] != ',' {
				return fmt.Errorf("%.20q in an array, want ',' or ']'", r.s[r.i:])
			}
			r.i++
			out.WriteByte(',')
		}
		if err := r.value(out, ']'); err != nil {
			return err
		}
	}
}

// value reads one value; close is the bracket that ends its container.
func (r *gemmaArgs) value(out *bytes.Buffer, close byte) error {
	r.space()
	if err := r.short(); err != nil {
		return err
	}
	switch {
	case strings.HasPrefix(r.s[r.i:], gemmaQuote):
		v, err := r.quoted()
		if err != nil {
			return err
		}
		writeJSONString(out, v)
		return nil
	case r.s[r.i] == '{':
		return r.object(out)
	case r.s[r.i] == '[':
		return r.array(out)
	}
	j := strings.IndexAny(r.s[r.i:], ",}]")
	if j < 0 {
		return errGemmaShort
	}
	if r.s[r.i+j] != ',' && r.s[r.i+j] != close {
		return fmt.Errorf("%q closes a value inside %q", r.s[r.i+j], close)
	}
	bare := strings.TrimSpace(r.s[r.i : r.i+j])
	r.i += j
	switch {
	case bare == "":
		return fmt.Errorf("an argument with no value")
	case bare == "true" || bare == "false":
		out.WriteString(bare)
	case bare == "null" || bare == "None":
		out.WriteString("null")
	case isJSONNumber(bare):
		out.WriteString(bare)
	default:
		writeJSONString(out, bare)
	}
	return nil
}

// isJSONNumber reports whether s is a number in JSON's grammar.
func isJSONNumber(s string) bool {
	if s == "" || !(s[0] == '-' || s[0] >= '0' && s[0] <= '9') {
		return false
	}
	if _, err := strconv.ParseFloat(s, 64); err != nil {
		return false
	}
	return json.Valid([]byte(s))
}

// writeJSONString writes s as a JSON string, '<', '>' and '&' as they are.
func writeJSONString(out *bytes.Buffer, s string) {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	enc.Encode(s)               // cannot fail for a string
	out.Truncate(out.Len() - 1) // Encode's newline
}

// gemmaSafeEnd returns how much of s may be emitted: not a suffix that
// could begin one of markers, not trailing white space, and not an
// incomplete UTF-8 sequence.
func gemmaSafeEnd(s string, markers ...string) int {
	end := len(s)
	for _, m := range markers {
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

// Gemma4InThought reports whether a prompt Gemma 4's template rendered
// ends inside the thought channel, so that the reply starts with its
// reasoning (ParseGemma4's thinking).
func Gemma4InThought(prompt string) bool {
	return strings.HasSuffix(prompt, gemmaChannel+gemmaThought+"\n")
}

// Gemma4EndMarkers are the markers that end a Gemma 4 reply: the end of the
// turn, the end of the sequence, and the start of a tool response (the
// model stops there for its tools' results).
func Gemma4EndMarkers() []string { return slices.Clone(gemmaEnds) }
