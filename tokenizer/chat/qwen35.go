package chat

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Qwen3.5 renders prompts with its Jinja chat template (Template; the
// template of the released checkpoints is in testdata/qwen3.5), which ends
// a thinking-mode prompt with "<|im_start|>assistant\n<think>\n" and a chat
// one (enable_thinking false) with an empty think block. ParseQwen35 and
// Qwen35StreamParser read the completion back.

// Markers of Qwen3.5's output.
const (
	qwenIMEnd      = "<|im_end|>"
	qwenEndOfText  = "<|endoftext|>"
	qwenThinkStart = "<think>"
	qwenThinkEnd   = "</think>"
	qwenToolCall   = "<tool_call>"
	qwenToolEnd    = "</tool_call>"
	qwenFunction   = "<function="
	qwenFuncEnd    = "</function>"
	qwenParam      = "<parameter="
	qwenParamEnd   = "</parameter>"
)

// ErrMalformedQwen35ToolCalls is wrapped by the errors ParseQwen35 and
// Qwen35StreamParser.Finish return for a tool-call block they cannot read.
var ErrMalformedQwen35ToolCalls = errors.New("chat: malformed Qwen3.5 tool calls")

// ParseQwen35 reads a Qwen3.5 completion, the text generated after a prompt
// its chat template rendered, back into reasoning, content and tool calls.
// thinking says whether the prompt ended inside a think block (thinking
// mode, the template's default) rather than after an empty one. tools are
// the request's tools: their parameter schemas type the arguments.
//
// The completion is read as follows.
//   - It ends at the first "<|im_end|>" or "<|endoftext|>", if any.
//   - In thinking mode the reasoning runs up to the first "</think>" (all
//     of it when there is none: the output was cut short); a "<think>" the
//     model repeats at its start is dropped.
//   - The content runs from there to the first "<tool_call>".
//   - Reasoning and content are trimmed of surrounding white space, as the
//     template trims them when it renders them back.
//   - From the first "<tool_call>" on, the text must be tool calls
//     separated by white space, each "<tool_call>" holding either the
//     template's form, "<function=NAME>" then "<parameter=KEY>\nVALUE\n
//     </parameter>" for each argument and "</function>", or Qwen3's JSON
//     form {"name": NAME, "arguments": {...}}, then "</tool_call>".
//
// An argument's text (one newline after its tag and one before the closing
// tag are the format's, not the value's) becomes a JSON value by the type
// its tool declares for it, as vLLM's Qwen3 XML tool parser types them:
// string (and undeclared parameters) as written; integer, number and
// boolean parsed ("True" and "False", which the template writes for
// Python booleans, included), object and array as JSON; "null" (or
// "None") is null except for strings; text that does not parse stays a
// string. Arguments is a JSON object in Python's json.dumps style, keys in
// order of appearance.
//
// If the tool calls are malformed (an unknown or unclosed element, a
// duplicate argument, text after the last call), the error wraps
// ErrMalformedQwen35ToolCalls and the returned Parsed holds, as a
// fallback, everything after the reasoning as Content and no tool calls.
func ParseQwen35(completion string, thinking bool, tools []Tool) (Parsed, error) {
	text := completion
	if i := qwenEOS(text); i >= 0 {
		text = text[:i]
	}
	var p Parsed
	if thinking {
		body := strings.TrimLeftFunc(text, unicode.IsSpace)
		body = strings.TrimPrefix(body, qwenThinkStart)
		i := strings.Index(body, qwenThinkEnd)
		if i < 0 {
			p.Reasoning = strings.TrimSpace(body)
			return p, nil
		}
		p.Reasoning = strings.TrimSpace(body[:i])
		text = body[i+len(qwenThinkEnd):]
	}
	i := strings.Index(text, qwenToolCall)
	if i < 0 {
		p.Content = strings.TrimSpace(text)
		return p, nil
	}
	calls, err := parseQwenToolCalls(text[i:], tools)
	if err != nil {
		p.Content = strings.TrimSpace(text)
		return p, err
	}
	p.Content = strings.TrimSpace(text[:i])
	p.ToolCalls = calls
	return p, nil
}

// qwenEOS is the index of the first end-of-turn marker in s, or -1.
func qwenEOS(s string) int {
	i, j := strings.Index(s, qwenIMEnd), strings.Index(s, qwenEndOfText)
	switch {
	case i < 0:
		return j
	case j < 0:
		return i
	}
	return min(i, j)
}

// parseQwenToolCalls reads a complete block of tool calls.
func parseQwenToolCalls(block string, tools []Tool) ([]ToolCall, error) {
	r := qwenReader{s: block}
	var calls []ToolCall
	for {
		r.skipSpace()
		if r.s == "" {
			break
		}
		if !r.take(qwenToolCall) {
			return nil, r.fail("want " + qwenToolCall + " or the end")
		}
		r.skipSpace()
		var call ToolCall
		var err error
		if strings.HasPrefix(r.s, "{") {
			call, err = r.jsonCall()
		} else {
			call, err = r.xmlCall(tools)
		}
		if err != nil {
			return nil, err
		}
		r.skipSpace()
		if !r.take(qwenToolEnd) {
			return nil, r.fail("want " + qwenToolEnd)
		}
		calls = append(calls, call)
	}
	return calls, nil
}

// qwenReader consumes a tool-call block from the front.
type qwenReader struct {
	s   string
	off int // bytes consumed, for error messages
}

func (r *qwenReader) fail(what string) error {
	near := r.s
	if len(near) > 40 {
		near = near[:40] + "…"
	}
	return fmt.Errorf("%w: at byte %d: %s, have %q", ErrMalformedQwen35ToolCalls, r.off, what, near)
}

func (r *qwenReader) advance(n int) {
	r.s = r.s[n:]
	r.off += n
}

func (r *qwenReader) take(prefix string) bool {
	if !strings.HasPrefix(r.s, prefix) {
		return false
	}
	r.advance(len(prefix))
	return true
}

// until consumes and returns the text up to the next sep, consuming sep.
func (r *qwenReader) until(sep string) (string, bool) {
	i := strings.Index(r.s, sep)
	if i < 0 {
		return "", false
	}
	v := r.s[:i]
	r.advance(i + len(sep))
	return v, true
}

func (r *qwenReader) skipSpace() {
	r.advance(len(r.s) - len(strings.TrimLeftFunc(r.s, unicode.IsSpace)))
}

// name reads a function or parameter name up to ">", which must not span
// lines.
func (r *qwenReader) name(what string) (string, error) {
	n, ok := r.until(">")
	if !ok || n == "" || strings.ContainsAny(n, "\n<") {
		return "", r.fail("unterminated " + what + " name")
	}
	return strings.TrimSpace(n), nil
}

// xmlCall reads "<function=NAME>", the parameters and "</function>".
func (r *qwenReader) xmlCall(tools []Tool) (ToolCall, error) {
	if !r.take(qwenFunction) {
		return ToolCall{}, r.fail("want " + qwenFunction + "…> or a JSON object")
	}
	name, err := r.name("function")
	if err != nil {
		return ToolCall{}, err
	}
	types := paramTypes(tools, name)
	var args strings.Builder
	args.WriteByte('{')
	seen := map[string]bool{}
	for {
		r.skipSpace()
		if r.take(qwenFuncEnd) {
			break
		}
		if !r.take(qwenParam) {
			return ToolCall{}, r.fail("want " + qwenParam + "…> or " + qwenFuncEnd)
		}
		key, err := r.name("parameter")
		if err != nil {
			return ToolCall{}, err
		}
		value, ok := r.until(qwenParamEnd)
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
		value = strings.TrimPrefix(value, "\n")
		value = strings.TrimSuffix(value, "\n")
		writePyString(&args, key)
		args.WriteString(": ")
		args.WriteString(typedArgument(value, types[key]))
	}
	args.WriteByte('}')
	return ToolCall{Name: name, Arguments: args.String()}, nil
}

// jsonCall reads Qwen3's {"name": ..., "arguments": {...}} form.
func (r *qwenReader) jsonCall() (ToolCall, error) {
	end := strings.Index(r.s, qwenToolEnd)
	if end < 0 {
		return ToolCall{}, r.fail("unterminated JSON tool call")
	}
	v, err := parseJSON([]byte(r.s[:end]))
	if err != nil || v.kind != jsonObject {
		return ToolCall{}, r.fail("tool call is not a JSON object")
	}
	var call ToolCall
	var haveName bool
	args := jsonValue{kind: jsonObject}
	for _, m := range v.members {
		switch m.key {
		case "name":
			if m.val.kind != jsonString {
				return ToolCall{}, r.fail("tool call name is not a string")
			}
			call.Name, haveName = m.val.s, true
		case "arguments":
			args = m.val
			if args.kind == jsonString { // arguments given as JSON text
				if inner, err := parseJSON([]byte(args.s)); err == nil {
					args = inner
				}
			}
			if args.kind != jsonObject {
				return ToolCall{}, r.fail("tool call arguments are not a JSON object")
			}
		}
	}
	if !haveName {
		return ToolCall{}, r.fail("tool call has no name")
	}
	call.Arguments = pyJSON(args)
	r.advance(end)
	return call, nil
}

// paramTypes returns the JSON-schema type of each parameter of the named
// tool ("" when untyped), or nil when the tool is not among tools.
func paramTypes(tools []Tool, name string) map[string]string {
	for i := range tools {
		if tools[i].Function.Name != name {
			continue
		}
		schema, err := parseJSON(tools[i].Function.Parameters)
		if err != nil {
			return nil
		}
		types := map[string]string{}
		for _, m := range schema.members {
			if m.key != "properties" {
				continue
			}
			for _, p := range m.val.members {
				types[p.key] = schemaType(p.val)
			}
		}
		return types
	}
	return nil
}

// schemaType is a property schema's type: its "type", the first non-null
// one of a list of types.
func schemaType(prop jsonValue) string {
	for _, m := range prop.members {
		if m.key != "type" {
			continue
		}
		switch m.val.kind {
		case jsonString:
			return m.val.s
		case jsonArray:
			for _, t := range m.val.items {
				if t.kind == jsonString && t.s != "null" {
					return t.s
				}
			}
		}
	}
	return ""
}

// typedArgument renders an argument's text as the JSON value its declared
// type makes of it.
func typedArgument(value, typ string) string {
	switch typ {
	case "", "string", "str", "text":
		return pyString(value)
	}
	v := strings.TrimSpace(value)
	if v == "null" || v == "None" {
		return "null"
	}
	switch typ {
	case "integer", "int":
		if _, err := strconv.ParseInt(v, 10, 64); err == nil {
			return v
		}
	case "number", "float":
		if j, err := parseJSON([]byte(v)); err == nil && j.kind == jsonNumber {
			return pyNumber(j.s)
		}
	case "boolean", "bool":
		switch strings.ToLower(v) {
		case "true":
			return "true"
		case "false":
			return "false"
		}
	default:
		if j, err := parseJSON([]byte(v)); err == nil {
			return pyJSON(j)
		}
	}
	return pyString(value)
}

// trailingSpace is the length of the run of white space that ends s.
func trailingSpace(s string) int {
	n := 0
	for len(s) > n {
		r, size := utf8.DecodeLastRuneInString(s[:len(s)-n])
		if !unicode.IsSpace(r) {
			break
		}
		n += size
	}
	return n
}
