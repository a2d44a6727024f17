package chat

import "github.com/strata-inference/strata/grammar"

// Grammars of the reasoning that precedes a constrained answer, for the
// formats whose reasoning ends at a marker (DeepSeekV4Reasoning and
// Qwen35Reasoning are beside their formats' tool grammars). The reasoning
// is free text up to its end marker; the answer follows.

// Gemma4Reasoning is the grammar of a Gemma 4 reply's thought channel up
// to and including its close "<channel|>" (and at most two newlines
// after it), as ParseGemma4 reads it: free text in which neither the
// close nor an end of the reply ("<turn|>", "<eos>", "<|tool_response>")
// occurs. With open, the reply opens the channel itself first
// ("<|channel>thought\n"); otherwise the prompt left it open. "<|channel>"
// and "<channel|>" are special tokens in Gemma's tokenizer
// (Gemma4GrammarMarkers).
func Gemma4Reasoning(open bool) grammar.Expr {
	x := grammar.Seq(textWithout(gemmaChannelEnd, gemmaTurnEnd, gemmaEOS, gemmaToolResponse), grammar.Literal(gemmaChannelEnd),
		grammar.Repeat(grammar.Literal("\n"), 0, 2))
	if open {
		x = grammar.Seq(grammar.Literal(gemmaChannel+gemmaThought+"\n"), x)
	}
	return x
}

// Gemma4GrammarMarkers are the special tokens Gemma4Reasoning writes.
func Gemma4GrammarMarkers() []string { return []string{gemmaChannel, gemmaChannelEnd} }

// MiniMaxReasoning is the grammar of a MiniMax reply's reasoning after
// the prompt's "<think>", up to and including "</think>" (and at most two
// newlines after it), as ParseMiniMax reads it in thinking mode: free
// text in which neither "</think>" nor the end of turn occurs.
func MiniMaxReasoning() grammar.Expr {
	return grammar.Seq(textWithout(miniMaxThinkEnd, miniMaxEndOfTurn), grammar.Literal(miniMaxThinkEnd),
		grammar.Repeat(grammar.Literal("\n"), 0, 2))
}
