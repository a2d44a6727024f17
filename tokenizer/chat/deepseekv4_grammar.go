package chat

import (
	"bytes"
	"fmt"

	"github.com/strata-inference/strata/grammar"
)

// DeepSeekV4Reasoning is the grammar of a thinking-mode reply's reasoning:
// any text up to and including the first "</think>", as ParseDeepSeekV4
// reads it.
func DeepSeekV4Reasoning() grammar.Expr { return grammar.TextUntil(tokThinkEnd) }

// DeepSeekV4ToolCalls returns the grammar of a reply's DSML tool-call
// block, exactly as EncodeDeepSeekV4 writes one after empty content and
// ParseDeepSeekV4 reads it back:
//
//	"\n\n<｜DSML｜tool_calls>\n" invoke ("\n" invoke)* "\n</｜DSML｜tool_calls>"
//
// with at least one and at most maxCalls invokes (0: no bound), each of one
// of tools, whose parameters follow the tool's parameter schema: its
// properties in declared order, optional ones possibly left out, string
// values as raw text with string="true" and others as JSON (laid out as opt
// says) with string="false". The arguments object ParseDeepSeekV4 builds
// from such a block validates against the schema. A raw text value cannot
// contain the parameter's end tag; JSON values are not checked for it.
func DeepSeekV4ToolCalls(tools []Tool, maxCalls int, opt grammar.Options) (grammar.Expr, error) {
	return dsmlToolCallsGrammar(v4Calls, tools, maxCalls, opt)
}

// DeepSeekV32ToolCalls is DeepSeekV4ToolCalls for DeepSeek-V3.2: the same
// invokes in a "<｜DSML｜function_calls>" block, as EncodeDeepSeekV32
// writes one and ParseDeepSeekV32 reads it back.
func DeepSeekV32ToolCalls(tools []Tool, maxCalls int, opt grammar.Options) (grammar.Expr, error) {
	return dsmlToolCallsGrammar(v32Calls, tools, maxCalls, opt)
}

// dsmlToolCallsGrammar is the grammar of a tool-call block named calls.
func dsmlToolCallsGrammar(calls callsBlock, tools []Tool, maxCalls int, opt grammar.Options) (grammar.Expr, error) {
	if len(tools) == 0 {
		return nil, fmt.Errorf("chat: no tools to call")
	}
	invokes := make([]grammar.Expr, len(tools))
	for i := range tools {
		x, err := dsmlInvokeGrammar(&tools[i], opt)
		if err != nil {
			return nil, err
		}
		invokes[i] = x
	}
	invoke := grammar.Alt(invokes...)
	more := grammar.Star(grammar.Seq(grammar.Literal("\n"), invoke))
	if maxCalls > 0 {
		more = grammar.Repeat(grammar.Seq(grammar.Literal("\n"), invoke), 0, maxCalls-1)
	}
	return grammar.Seq(
		grammar.Literal("\n\n"+calls.open()+"\n"),
		invoke, more,
		grammar.Literal("\n"+calls.close()),
	), nil
}

// dsmlInvokeGrammar is one invoke element calling t, as writeDSMLInvoke
// writes it.
func dsmlInvokeGrammar(t *Tool, opt grammar.Options) (grammar.Expr, error) {
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
	parts := make([]grammar.Expr, len(props))
	required := make([]bool, len(props))
	for i, p := range props {
		open := dsmlParam + p.Name + "\" string=\""
		var alts []grammar.Expr
		text, err := grammar.TextWithout(p.Text, dsmlParamEnd)
		if err != nil {
			return nil, fmt.Errorf("chat: tool %s: parameter %s: %w", name, p.Name, err)
		}
		alts = append(alts, grammar.Seq(grammar.Literal("true\">"), text))
		alts = append(alts, grammar.Seq(grammar.Literal("false\">"), p.NonString))
		parts[i] = grammar.Seq(grammar.Literal(open), grammar.Alt(alts...), grammar.Literal(dsmlParamEnd))
		required[i] = p.Required
	}
	return grammar.Seq(
		grammar.Literal(dsmlInvoke+name+"\">\n"),
		grammar.Separated(parts, required, grammar.Literal("\n")),
		grammar.Literal("\n"+dsmlInvokeEnd),
	), nil
}
