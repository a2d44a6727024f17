package server

import (
	"log/slog"
	"strings"

	"github.com/strata-inference/strata/tokenizer/chat"
)

// reply follows one choice of a chat-shaped request (chat completions,
// Anthropic messages, responses) through its chat format's ReplyParser:
// what it has produced so far and, once finished, why it stopped.
type reply struct {
	parser ReplyParser
	// single keeps only the first tool call (parallel tool calls off).
	single bool
	// maxCalls, when positive, keeps at most that many tool calls.
	maxCalls int

	reasoning, content strings.Builder
	calls              []chat.ToolCall
	// finish is "", then "stop", "length" or "tool_calls".
	finish string
	// stop is the stop string that ended the reply.
	stop string
	// tokens counts the tokens generated; reasoningTokens those whose text
	// was reasoning (a token that closes the reasoning counts as reasoning).
	tokens, reasoningTokens int
	// cached is the prompt tokens the prefix cache supplied.
	cached int
	// ids are the generated token ids, kept when keepIDs is set.
	keepIDs bool
	ids     []int32
}

func newReply(f ChatFormat, opt ChatOptions, tools []chat.Tool) *reply {
	opt.Tools = tools
	return &reply{parser: replyParser(f, opt, tools)}
}

// feed passes a delta through the parser and returns the reasoning and
// content now certain; on the last delta it also finishes the parser and
// settles the finish reason and the tool calls.
func (st *reply) feed(d delta, log *slog.Logger) (reasoning, content string) {
	reasoning, content = st.parser.Add(d.text)
	st.tokens += len(d.tokens)
	st.cached = d.cached
	if st.keepIDs {
		for _, t := range d.tokens {
			st.ids = append(st.ids, t.id)
		}
	}
	if d.finish != "" {
		r, c, calls, err := st.parser.Finish()
		reasoning += r
		content += c
		if err != nil {
			log.Debug("reply has malformed tool calls; returned as content", "err", err)
		}
		if st.single && len(calls) > 1 {
			calls = calls[:1]
		}
		if st.maxCalls > 0 && len(calls) > st.maxCalls {
			calls = calls[:st.maxCalls]
		}
		st.calls = calls
		st.finish, st.stop = d.finish, d.stop
		if len(calls) > 0 {
			st.finish = "tool_calls"
		}
	}
	if reasoning != "" {
		st.reasoningTokens += len(d.tokens)
	}
	st.reasoning.WriteString(reasoning)
	st.content.WriteString(content)
	return reasoning, content
}

// message is the reply as an assistant message of a conversation, with
// the tool calls' ids given by ids (one per call).
func (st *reply) message(ids []string) chat.Message {
	m := chat.Message{Role: chat.RoleAssistant, Content: st.content.String(), ReasoningContent: st.reasoning.String()}
	for i, c := range st.calls {
		c.ID = ids[i]
		m.ToolCalls = append(m.ToolCalls, c)
	}
	return m
}
