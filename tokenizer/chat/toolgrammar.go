package chat

import (
	"fmt"

	"github.com/strata-inference/strata/grammar"
)

// ToolCallGrammar says what the grammar of a reply's block of tool calls
// allows, for the formats' builders (DeepSeekV4ToolCallBlock,
// Qwen35ToolCalls).
type ToolCallGrammar struct {
	// Tools are the tools that may be called; at least one.
	Tools []Tool
	// Free[i] leaves the arguments of Tools[i] to the model (a tool that
	// is not strict): any number of parameters named with letters,
	// digits, '_', '-' and '.', with any values. The grammar cannot keep
	// a free call from repeating a parameter, which the formats' parsers
	// refuse (the reply is then read as content). Otherwise (and for
	// every tool when Free is nil) the arguments follow the tool's
	// parameter schema: its declared properties in order, optional ones
	// possibly left out, additional properties never.
	Free []bool
	// MaxCalls bounds the calls in the block (0: no bound); there is
	// always at least one.
	MaxCalls int
	// JSON lays out the JSON values in the arguments.
	JSON grammar.Options
}

func (g *ToolCallGrammar) free(i int) bool { return i < len(g.Free) && g.Free[i] }

// block is one to MaxCalls calls, each one of the tools' invoke grammars,
// with sep between them.
func (g *ToolCallGrammar) block(invoke func(t *Tool, free bool) (grammar.Expr, error), sep string) (grammar.Expr, error) {
	if len(g.Tools) == 0 {
		return nil, fmt.Errorf("chat: no tools to call")
	}
	invokes := make([]grammar.Expr, len(g.Tools))
	for i := range g.Tools {
		x, err := invoke(&g.Tools[i], g.free(i))
		if err != nil {
			return nil, err
		}
		invokes[i] = x
	}
	call := grammar.Alt(invokes...)
	next := grammar.Seq(grammar.Literal(sep), call)
	more := grammar.Star(next)
	if g.MaxCalls > 0 {
		more = grammar.Repeat(next, 0, g.MaxCalls-1)
	}
	return grammar.Seq(call, more), nil
}

// textWithout is any UTF-8 text in which none of stops occurs.
func textWithout(stops ...string) grammar.Expr {
	x := grammar.Star(grammar.UTF8Char())
	for _, s := range stops {
		var err error
		if x, err = grammar.TextWithout(x, s); err != nil {
			// Text without a handful of short markers has a handful of
			// states per marker: far below the automaton bound.
			panic(err)
		}
	}
	return x
}

// freeArgName is the name of a free argument: an identifier of letters,
// digits, '_', '-' and '.', at most 64 bytes, not starting with a digit.
func freeArgName() grammar.Expr {
	first := grammar.Alt(grammar.Bytes('a', 'z'), grammar.Bytes('A', 'Z'), grammar.Literal("_"))
	rest := grammar.Alt(grammar.Bytes('a', 'z'), grammar.Bytes('A', 'Z'), grammar.Bytes('0', '9'), grammar.OneOf("_-."))
	return grammar.Seq(first, grammar.Repeat(rest, 0, 63))
}
