package chat

import (
	"bytes"
	"fmt"

	"github.com/strata-inference/strata/grammar"
)

// GLMReasoning is the grammar of a GLM thinking-mode reply's reasoning: text
// up to and including the first "</think>", in which neither "<tool_call>"
// (ParseGLM would end the reasoning there) nor an end-of-turn token's text
// occurs.
func GLMReasoning() grammar.Expr {
	x, err := glmText(grammar.Star(grammar.UTF8Char()), tokThinkEnd, glmToolCall)
	if err != nil {
		// Free text without a few fixed strings is regular and small.
		panic(err)
	}
	return grammar.Seq(x, grammar.Literal(tokThinkEnd))
}

// GLMContent is the grammar of a GLM reply's free content: any text in
// which neither "<tool_call>" nor an end-of-turn token's text occurs, so
// that ParseGLM reads all of it as content (and tool calls may follow it).
func GLMContent() grammar.Expr {
	x, err := glmText(grammar.Star(grammar.UTF8Char()), glmToolCall)
	if err != nil {
		panic(err) // as in GLMReasoning
	}
	return x
}

// GLMToolCalls returns the grammar of a GLM reply's tool calls of one to
// maxCalls (0: no bound) calls of tools, every call's arguments following
// its tool's parameter schema; it is GLMToolCallBlock with no free tools.
func GLMToolCalls(tools []Tool, maxCalls int, opt grammar.Options) (grammar.Expr, error) {
	return GLMToolCallBlock(ToolCallGrammar{Tools: tools, MaxCalls: maxCalls, JSON: opt})
}

// GLMToolCallBlock returns the grammar of a GLM reply's tool calls,
// exactly as the GLM template writes them after the content and ParseGLM
// reads them back:
//
//	"<tool_call>" NAME ("<arg_key>" KEY "</arg_key><arg_value>" VALUE "</arg_value>")* "</tool_call>"
//
// the calls g allows, back to back. A strict tool's call has its
// parameters in declared order, optional ones possibly left out. A value
// is written the way ParseGLM will read it, which depends on the
// parameter's declared type (its "type", the first non-null of a list):
// raw text for a string or an untyped parameter, JSON (laid out as g.JSON
// says) otherwise; so the arguments object ParseGLM builds validates
// against the schema. A free tool's call has any keys (letters, digits,
// '_', '-', '.') with any raw text values, which ParseGLM types as it
// types any call's. Raw text contains neither "</arg_value>" nor an
// end-of-turn token's text; JSON values are not checked for them.
func GLMToolCallBlock(g ToolCallGrammar) (grammar.Expr, error) {
	return g.block(func(t *Tool, free bool) (grammar.Expr, error) {
		if free {
			return glmFreeCall(t)
		}
		return glmCallGrammar(t, g.JSON)
	}, "")
}

// glmFreeCall is one <tool_call> element calling t with any arguments.
func glmFreeCall(t *Tool) (grammar.Expr, error) {
	value, err := glmText(grammar.Star(grammar.UTF8Char()), glmArgValueEnd)
	if err != nil {
		return nil, fmt.Errorf("chat: tool %s: %w", t.Function.Name, err)
	}
	arg := grammar.Seq(grammar.Literal(glmArgKey), freeArgName(), grammar.Literal(glmArgKeyEnd+glmArgValue), value, grammar.Literal(glmArgValueEnd))
	return grammar.Seq(grammar.Literal(glmToolCall+t.Function.Name), grammar.Star(arg), grammar.Literal(glmToolCallEnd)), nil
}

// glmCallGrammar is one <tool_call> element calling t, its arguments
// following its schema.
func glmCallGrammar(t *Tool, opt grammar.Options) (grammar.Expr, error) {
	name := t.Function.Name
	var props []grammar.Property
	if p := bytes.TrimSpace(t.Function.Parameters); len(p) > 0 && string(p) != "null" {
		s, err := grammar.ParseSchema(p, opt)
		if err != nil {
			return nil, fmt.Errorf("chat: tool %s: parameters: %w", name, err)
		}
		if props, err = s.Properties(); err != nil {
			return nil, fmt.Errorf("chat: tool %s: parameters: %w", name, err)
		}
	}
	types := paramTypes([]Tool{*t}, name)
	parts := make([]grammar.Expr, len(props))
	required := make([]bool, len(props))
	for k, p := range props {
		var value grammar.Expr
		switch types[p.Name] {
		case "", "string", "str", "text":
			// ParseGLM keeps the value as it is: a string.
			text, err := glmText(p.Text, glmArgValueEnd)
			if err != nil {
				return nil, fmt.Errorf("chat: tool %s: parameter %s: %w", name, p.Name, err)
			}
			value = text
		default:
			// ParseGLM reads the value as JSON of the declared type.
			value = p.NonString
		}
		parts[k] = grammar.Seq(
			grammar.Literal(glmArgKey+p.Name+glmArgKeyEnd+glmArgValue),
			value,
			grammar.Literal(glmArgValueEnd),
		)
		required[k] = p.Required
	}
	return grammar.Seq(
		grammar.Literal(glmToolCall+name),
		grammar.Separated(parts, required, grammar.Empty()),
		grammar.Literal(glmToolCallEnd),
	), nil
}

// glmText is text (regular) without any of stops and without the text of
// GLM's end-of-turn tokens, at which ParseGLM ends the completion.
func glmText(text grammar.Expr, stops ...string) (grammar.Expr, error) {
	var err error
	for _, s := range append(stops, GLMEndOfTurn()...) {
		if text, err = grammar.TextWithout(text, s); err != nil {
			return nil, err
		}
	}
	return text, nil
}
