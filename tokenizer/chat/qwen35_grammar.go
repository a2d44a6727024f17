package chat

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/strata-inference/strata/grammar"
)

// Qwen35Reasoning is the grammar of a thinking-mode Qwen3.5 reply's
// reasoning: any text in which no end-of-turn marker occurs, up to and
// including the first "</think>", then the blank line the chat template
// writes after it, as ParseQwen35 reads it.
func Qwen35Reasoning() grammar.Expr {
	return grammar.Seq(textWithout(qwenThinkEnd, qwenIMEnd, qwenEndOfText), grammar.Literal(qwenThinkEnd+"\n\n"))
}

// Qwen35Content is the grammar of a Qwen3.5 reply's free content: any text
// in which neither "<tool_call>" nor an end-of-turn marker occurs, so that
// ParseQwen35 reads all of it as content (and tool calls may follow it).
func Qwen35Content() grammar.Expr { return textWithout(qwenToolCall, qwenIMEnd, qwenEndOfText) }

// Qwen35ToolCalls returns the grammar of a Qwen3.5 reply's tool calls in
// the chat template's XML form, as the template writes them after empty
// content and ParseQwen35 reads them back:
//
//	call ("\n" call)*
//	call = "<tool_call>\n<function=NAME>\n" param* "</function>\n</tool_call>"
//	param = "<parameter=KEY>\n" VALUE "\n</parameter>\n"
//
// with the calls g allows. ParseQwen35 types each value by the type the
// tool's schema declares for its parameter, so a strict tool's values are
// written as that reading needs them: a parameter declared a string (or
// of no type) as raw text, without "</parameter>"; any other as compact
// JSON, an integer of at most 18 digits (ParseQwen35 reads integers into
// int64), a number of at most 8 integer and 7 fraction digits (it reads
// numbers through float64, which holds such decimals exactly). The
// arguments ParseQwen35 builds from such calls validate against the
// schema, but for numbers nested in array and object values, which it
// also reads through float64. A parameter whose values cannot be written
// so is left out when it is optional and an error when it is required; so
// is a property name that cannot stand in a parameter tag (with '<', '>',
// a line break or blank space at an end). JSON values are not checked for
// "</parameter>" in their strings. A free tool's parameters are any names
// with any raw text.
func Qwen35ToolCalls(g ToolCallGrammar) (grammar.Expr, error) {
	return g.block(func(t *Tool, free bool) (grammar.Expr, error) {
		var params grammar.Expr
		if free {
			param := grammar.Seq(grammar.Literal(qwenParam), freeArgName(), grammar.Literal(">\n"),
				textWithout(qwenParamEnd), grammar.Literal("\n"+qwenParamEnd+"\n"))
			params = grammar.Star(param)
		} else {
			var err error
			if params, err = qwenParams(t, g.JSON); err != nil {
				return nil, err
			}
		}
		return grammar.Seq(
			grammar.Literal(qwenToolCall+"\n"+qwenFunction+t.Function.Name+">\n"),
			params,
			grammar.Literal(qwenFuncEnd+"\n"+qwenToolEnd),
		), nil
	}, "\n")
}

// qwenParams is the parameters of a call of t that follow its schema.
func qwenParams(t *Tool, opt grammar.Options) (grammar.Expr, error) {
	name := t.Function.Name
	p := bytes.TrimSpace(t.Function.Parameters)
	if len(p) == 0 || string(p) == "null" {
		return grammar.Empty(), nil
	}
	s, err := grammar.ParseSchema(p, opt)
	if err != nil {
		return nil, fmt.Errorf("chat: tool %s: parameters: %w", name, err)
	}
	props, err := s.Properties()
	if err != nil {
		return nil, fmt.Errorf("chat: tool %s: parameters: %w", name, err)
	}
	types := paramTypes([]Tool{*t}, name) // as ParseQwen35 reads them
	var parts []grammar.Expr
	var required []bool
	for _, pr := range props {
		value, why, err := qwenValue(pr, types[pr.Name])
		if err != nil {
			return nil, fmt.Errorf("chat: tool %s: parameter %s: %w", name, pr.Name, err)
		}
		if why == "" && (pr.Name == "" || strings.ContainsAny(pr.Name, "<>\n\r") || strings.TrimSpace(pr.Name) != pr.Name) {
			why = "its name cannot be written in a Qwen3.5 parameter tag"
		}
		if why != "" {
			if pr.Required {
				return nil, fmt.Errorf("chat: tool %s: required parameter %q cannot be generated in Qwen3.5's tool-call format: %s", name, pr.Name, why)
			}
			continue
		}
		parts = append(parts, grammar.Seq(grammar.Literal(qwenParam+pr.Name+">\n"), value, grammar.Literal("\n"+qwenParamEnd+"\n")))
		required = append(required, pr.Required)
	}
	return grammar.Separated(parts, required, grammar.Empty()), nil
}

// qwenValue is the grammar of a parameter's value text for its declared
// type, or why it has none.
func qwenValue(p grammar.Property, typ string) (grammar.Expr, string, error) {
	digit := grammar.Bytes('0', '9')
	sign := grammar.Optional(grammar.Literal("-"))
	var x grammar.Expr
	switch typ {
	case "", "string", "str", "text":
		if grammar.IsNothing(p.Text) {
			return nil, "it is read as a string, and its schema admits no string", nil
		}
		v, err := grammar.TextWithout(p.Text, qwenParamEnd)
		return v, "", err
	case "integer", "int":
		x = grammar.Alt(grammar.Literal("null"), grammar.Seq(sign, grammar.Repeat(digit, 1, 18)))
	case "number", "float":
		x = grammar.Alt(grammar.Literal("null"), grammar.Seq(sign, grammar.Repeat(digit, 1, 8),
			grammar.Optional(grammar.Seq(grammar.Literal("."), grammar.Repeat(digit, 1, 7)))))
	}
	v := p.NonString
	if x != nil && !grammar.IsNothing(v) {
		var err error
		if v, err = grammar.Intersect(v, x); err != nil {
			return nil, "", err
		}
	}
	if grammar.IsNothing(v) {
		return nil, "it is read as " + typ + ", and its schema admits no such value", nil
	}
	return v, "", nil
}
