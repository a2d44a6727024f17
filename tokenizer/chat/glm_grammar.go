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

// GLMToolCalls returns the grammar of a GLM reply's tool calls, exactly as
// the GLM template writes them after the content and ParseGLM reads them
// back:
//
//	"<tool_call>" NAME ("<arg_key>" KEY "</arg_key><arg_value>" VALUE "</arg_value>")* "</tool_call>"
//
// one to maxCalls (0: no bound) of them, back to back, each calling one of
// tools with its parameters in declared order, optional ones possibly left
// out. A value is written the way ParseGLM will read it, which depends on
// the parameter's declared type (its "type", the first non-null of a list):
// raw text for a string or an untyped parameter, JSON (laid out as opt
// says) otherwise; so the arguments object ParseGLM builds validates
// against the schema. Raw text contains neither "</arg_value>" nor an
// end-of-turn token's text; JSON values are not checked for them.
func GLMToolCalls(tools []Tool, maxCalls int, opt grammar.Options) (grammar.Expr, error) {
	if len(tools) == 0 {
		return nil, fmt.Errorf("chat: no tools to call")
	}
	calls := make([]grammar.Expr, len(tools))
	for i := range tools {
		x, err := glmCallGrammar(tools, i, opt)
		if err != nil {
			return nil, err
		}
		calls[i] = x
	}
	call := grammar.Alt(calls...)
	more := grammar.Star(call)
	if maxCalls > 0 {
		more = grammar.Repeat(call, 0, maxCalls-1)
	}
	return grammar.Seq(call, more), nil
}

// glmCallGrammar is one <tool_call> element calling tools[i].
func glmCallGrammar(tools []Tool, i int, opt grammar.Options) (grammar.Expr, error) {
	name := tools[i].Function.Name
	var props []grammar.Property
	if p := bytes.TrimSpace(tools[i].Function.Parameters); len(p) > 0 && string(p) != "null" {
		s, err := grammar.ParseSchema(p, opt)
		if err != nil {
			return nil, fmt.Errorf("chat: tool %s: parameters: %w", name, err)
		}
		if props, err = s.Properties(); err != nil {
			return nil, fmt.Errorf("chat: tool %s: parameters: %w", name, err)
		}
	}
	types := paramTypes(tools[i:i+1], name)
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
