package chat

import (
	"bytes"
	"fmt"

	"github.com/strata-inference/strata/grammar"
)

// DeepSeekV4Reasoning is the grammar of a thinking-mode reply's reasoning:
// any text up to and including the first "</think>", as ParseDeepSeekV4
// reads it, in which neither a tool-call block nor the EOS text begins
// (the parser would read either as the end of the reasoning).
func DeepSeekV4Reasoning() grammar.Expr { return dsmlReasoning(v4Calls) }

// DeepSeekV32Reasoning is DeepSeekV4Reasoning for DeepSeek-V3.2, whose
// reasoning ends early at a "<｜DSML｜function_calls>" block.
func DeepSeekV32Reasoning() grammar.Expr { return dsmlReasoning(v32Calls) }

func dsmlReasoning(calls callsBlock) grammar.Expr {
	return grammar.Seq(textWithout(tokThinkEnd, calls.open(), tokEOS), grammar.Literal(tokThinkEnd))
}

// DeepSeekV4Content is the grammar of a reply's free content: any text in
// which no DSML tag and not the EOS text begins, so that ParseDeepSeekV4
// (and ParseDeepSeekV32: the tags and EOS are the same) reads all of it as
// content (and a tool-call block may follow it).
func DeepSeekV4Content() grammar.Expr { return textWithout(dsmlStart, tokEOS) }

// DeepSeekV4ToolCalls returns the grammar of a reply's DSML tool-call
// block of one to maxCalls (0: any number) calls of tools, every call's
// arguments following its tool's parameter schema; it is
// DeepSeekV4ToolCallBlock with no free tools.
func DeepSeekV4ToolCalls(tools []Tool, maxCalls int, opt grammar.Options) (grammar.Expr, error) {
	return DeepSeekV4ToolCallBlock(ToolCallGrammar{Tools: tools, MaxCalls: maxCalls, JSON: opt})
}

// DeepSeekV32ToolCalls is DeepSeekV4ToolCalls for DeepSeek-V3.2: the same
// invokes in a "<｜DSML｜function_calls>" block, as EncodeDeepSeekV32
// writes one and ParseDeepSeekV32 reads it back.
func DeepSeekV32ToolCalls(tools []Tool, maxCalls int, opt grammar.Options) (grammar.Expr, error) {
	return DeepSeekV32ToolCallBlock(ToolCallGrammar{Tools: tools, MaxCalls: maxCalls, JSON: opt})
}

// DeepSeekV4ToolCallBlock returns the grammar of a reply's DSML tool-call
// block, exactly as EncodeDeepSeekV4 writes one after empty content and
// ParseDeepSeekV4 reads it back:
//
//	"\n\n<｜DSML｜tool_calls>\n" invoke ("\n" invoke)* "\n</｜DSML｜tool_calls>"
//
// with the calls g allows. A strict tool's parameters follow its schema:
// its properties in declared order, optional ones possibly left out,
// string values as raw text with string="true" and others as JSON (laid
// out as g.JSON says) with string="false"; the arguments object
// ParseDeepSeekV4 builds from such a block validates against the schema.
// A free tool's parameters are any names with raw text or JSON values. A
// raw text value cannot contain the parameter's end tag; JSON values are
// not checked for it.
func DeepSeekV4ToolCallBlock(g ToolCallGrammar) (grammar.Expr, error) {
	return dsmlToolCallBlock(v4Calls, g)
}

// DeepSeekV32ToolCallBlock is DeepSeekV4ToolCallBlock for DeepSeek-V3.2:
// the same invokes in a "<｜DSML｜function_calls>" block.
func DeepSeekV32ToolCallBlock(g ToolCallGrammar) (grammar.Expr, error) {
	return dsmlToolCallBlock(v32Calls, g)
}

// dsmlToolCallBlock is the grammar of a tool-call block named calls.
func dsmlToolCallBlock(calls callsBlock, g ToolCallGrammar) (grammar.Expr, error) {
	invokes, err := g.block(func(t *Tool, free bool) (grammar.Expr, error) {
		if free {
			return dsmlFreeInvoke(t, g.JSON), nil
		}
		return dsmlInvokeGrammar(t, g.JSON)
	}, "\n")
	if err != nil {
		return nil, err
	}
	return grammar.Seq(
		grammar.Literal("\n\n"+calls.open()+"\n"),
		invokes,
		grammar.Literal("\n"+calls.close()),
	), nil
}

// dsmlFreeInvoke is one invoke element calling t with any parameters.
func dsmlFreeInvoke(t *Tool, opt grammar.Options) grammar.Expr {
	param := grammar.Seq(
		grammar.Literal(dsmlParam), freeArgName(), grammar.Literal("\" string=\""),
		grammar.Alt(
			grammar.Seq(grammar.Literal("true\">"), textWithout(dsmlParamEnd)),
			grammar.Seq(grammar.Literal("false\">"), grammar.JSONValue(opt)),
		),
		grammar.Literal(dsmlParamEnd),
	)
	return grammar.Seq(
		grammar.Literal(dsmlInvoke+t.Function.Name+"\">\n"),
		grammar.Optional(grammar.Seq(param, grammar.Star(grammar.Seq(grammar.Literal("\n"), param)))),
		grammar.Literal("\n"+dsmlInvokeEnd),
	)
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
