package chat

import (
	"fmt"
	"slices"
	"strings"
)

// DeepSeek-V4's special tokens and markers.
const (
	tokBOS            = "<｜begin▁of▁sentence｜>"
	tokEOS            = "<｜end▁of▁sentence｜>"
	tokUser           = "<｜User｜>"
	tokAssistant      = "<｜Assistant｜>"
	tokLatestReminder = "<｜latest_reminder｜>"
	tokThinkStart     = "<think>"
	tokThinkEnd       = "</think>"

	dsml             = "｜DSML｜"
	dsmlStart        = "<" + dsml // every DSML tag opens with this
	dsmlToolCalls    = "<" + dsml + "tool_calls>"
	dsmlToolCallsEnd = "</" + dsml + "tool_calls>"
	dsmlInvoke       = "<" + dsml + "invoke name=\""
	dsmlInvokeEnd    = "</" + dsml + "invoke>"
	dsmlParam        = "<" + dsml + "parameter name=\""
	dsmlParamEnd     = "</" + dsml + "parameter>"
)

// deepSeekV4TaskToken returns the token of a quick instruction task.
func deepSeekV4TaskToken(task string) (string, bool) {
	switch task {
	case "action", "query", "authority", "domain", "title", "read_url":
		return "<｜" + task + "｜>", true
	}
	return "", false
}

const reasoningEffortMaxPrefix = "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n" +
	"You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial scenarios.\n" +
	"Explicitly write out your entire deliberation process, documenting every intermediate step, considered alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n"

// The tools section of a system or developer message; the tool schemas go
// between the two halves, one JSON object a line.
const (
	toolsSectionHead = "## Tools\n\n" +
		"You have access to a set of tools to help answer the user's question. You can invoke tools by writing a \"" + dsmlToolCalls + "\" block like the following:\n\n" +
		dsmlToolCalls + "\n" +
		dsmlInvoke + "$TOOL_NAME\">\n" +
		dsmlParam + "$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE" + dsmlParamEnd + "\n" +
		"...\n" +
		dsmlInvokeEnd + "\n" +
		dsmlInvoke + "$TOOL_NAME2\">\n" +
		"...\n" +
		dsmlInvokeEnd + "\n" +
		dsmlToolCallsEnd + "\n\n" +
		"String parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\n" +
		"If thinking_mode is enabled (triggered by " + tokThinkStart + "), you MUST output your complete reasoning inside " + tokThinkStart + "..." + tokThinkEnd + " BEFORE any tool calls or final response.\n\n" +
		"Otherwise, output directly after " + tokThinkEnd + " with tool calls or final response.\n\n" +
		"### Available Tool Schemas\n\n"
	toolsSectionTail = "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n"

	responseFormatHead = "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n"
)

// Options control EncodeDeepSeekV4.
type Options struct {
	// Thinking selects thinking mode: the assistant reasons inside
	// <think>...</think> before answering. Otherwise chat mode: every
	// assistant turn opens with </think>.
	Thinking bool
	// KeepReasoning keeps the reasoning of assistant turns before the last
	// user message. By default (and as DeepSeek-V4 is trained) thinking mode
	// drops it, unless some message carries tools, in which case all
	// reasoning is kept.
	KeepReasoning bool
	// ReasoningEffort is "", "high" or "max". "max" prefixes the prompt with
	// DeepSeek-V4's maximum-effort instruction in thinking mode; "high" is
	// the default effort and renders like "".
	ReasoningEffort string
}

// v4Message is a message during encoding: tool messages are merged into
// user messages as blocks, as DeepSeek-V4 has no tool role.
type v4Message struct {
	Message
	blocks []v4Block // user messages: text and tool results, joined by "\n\n"
}

type v4Block struct {
	toolResult bool
	text       string
	toolCallID string
}

// EncodeDeepSeekV4 renders a conversation as a DeepSeek-V4 prompt, byte for
// byte as DeepSeek's reference encoder (encoding_dsv4.py) does.
//
// The prompt starts with the BOS token. tools, if any, are placed on the
// first message when it is a system message (which must not carry tools of
// its own), and otherwise on an empty system message put first. Tool
// messages become <tool_result> blocks of a user turn; consecutive user and
// tool messages share one turn, and tool results are ordered as the calls
// of the preceding assistant turn (matched by ID).
//
// The generation prompt is implied: after a final user, developer or tool
// message the prompt ends with "<｜Assistant｜><think>" (thinking mode) or
// "<｜Assistant｜></think>" (chat mode), ready for the model's reply, which
// ParseDeepSeekV4 reads back. A final assistant message ends with the EOS
// token unless it has WithoutEOS.
//
// EncodeDeepSeekV4 returns an error for an unknown role, an unknown task, an
// empty developer message, tool-call arguments that are not a JSON object
// (empty arguments stand for {}), or malformed tool parameters. Unlike the
// reference, it does not wrap non-JSON arguments as a string.
func EncodeDeepSeekV4(msgs []Message, tools []Tool, opt Options) (string, error) {
	switch opt.ReasoningEffort {
	case "", "high", "max":
	default:
		return "", fmt.Errorf("chat: invalid reasoning effort %q (want \"\", \"high\" or \"max\")", opt.ReasoningEffort)
	}
	for i := range msgs {
		if err := validateV4Message(&msgs[i]); err != nil {
			return "", fmt.Errorf("chat: message %d (%s): %w", i, msgs[i].Role, err)
		}
	}
	if len(tools) > 0 {
		if len(msgs) > 0 && msgs[0].Role == RoleSystem {
			if len(msgs[0].Tools) > 0 {
				return "", fmt.Errorf("chat: tools given both as an argument and on the system message")
			}
			sys := msgs[0]
			sys.Tools = tools
			msgs = append([]Message{sys}, msgs[1:]...)
		} else {
			msgs = append([]Message{{Role: RoleSystem, Tools: tools}}, msgs...)
		}
	}

	conv := mergeToolMessages(msgs)
	sortToolResults(conv)

	drop := !opt.KeepReasoning && !slices.ContainsFunc(conv, func(m v4Message) bool { return len(m.Tools) > 0 })
	if opt.Thinking && drop {
		conv = dropEarlierReasoning(conv)
	}

	e := v4Encoder{msgs: conv, thinking: opt.Thinking, drop: drop, lastUser: lastUserIndex(conv)}
	e.b.WriteString(tokBOS)
	if opt.Thinking && opt.ReasoningEffort == "max" && len(conv) > 0 {
		e.b.WriteString(reasoningEffortMaxPrefix)
	}
	for i := range conv {
		if err := e.render(i); err != nil {
			return "", err
		}
	}
	return e.b.String(), nil
}

// validateV4Message checks what EncodeDeepSeekV4 would otherwise trip over
// only on some paths, so that errors do not depend on the rendering.
func validateV4Message(m *Message) error {
	switch m.Role {
	case RoleSystem, RoleUser, RoleAssistant, RoleTool, RoleLatestReminder:
	case RoleDeveloper:
		if m.Content == "" {
			return fmt.Errorf("a developer message needs content")
		}
	default:
		return fmt.Errorf("unknown role %q (want system, developer, user, assistant, tool or latest_reminder)", m.Role)
	}
	if m.Task != "" {
		if _, ok := deepSeekV4TaskToken(m.Task); !ok {
			return fmt.Errorf("unknown task %q (want action, query, authority, domain, title or read_url)", m.Task)
		}
	}
	for i := range m.ToolCalls {
		if _, err := m.ToolCalls[i].arguments(); err != nil {
			return err
		}
	}
	for i := range m.Tools {
		if _, err := m.Tools[i].Function.object(); err != nil {
			return err
		}
	}
	if len(m.ResponseFormat) > 0 {
		if _, err := parseJSON(m.ResponseFormat); err != nil {
			return fmt.Errorf("response format: %w", err)
		}
	}
	return nil
}

// mergeToolMessages turns tool messages into tool-result blocks of user
// messages, merging runs of user and tool messages into one user turn. A
// user message is not merged into a preceding one that has a task; a user
// message merged into a preceding one loses its own task and WithoutEOS, as
// in the reference.
func mergeToolMessages(msgs []Message) []v4Message {
	out := make([]v4Message, 0, len(msgs))
	mergeable := func(needNoTask bool) bool {
		if len(out) == 0 {
			return false
		}
		last := &out[len(out)-1]
		return last.Role == RoleUser && last.blocks != nil && !(needNoTask && last.Task != "")
	}
	for _, m := range msgs {
		switch m.Role {
		case RoleTool:
			b := v4Block{toolResult: true, text: m.Content, toolCallID: m.ToolCallID}
			if mergeable(false) {
				out[len(out)-1].blocks = append(out[len(out)-1].blocks, b)
			} else {
				out = append(out, v4Message{Message: Message{Role: RoleUser}, blocks: []v4Block{b}})
			}
		case RoleUser:
			b := v4Block{text: m.Content}
			if mergeable(true) {
				out[len(out)-1].blocks = append(out[len(out)-1].blocks, b)
			} else {
				um := Message{Role: RoleUser, Content: m.Content, Task: m.Task, WithoutEOS: m.WithoutEOS}
				out = append(out, v4Message{Message: um, blocks: []v4Block{b}})
			}
		default:
			out = append(out, v4Message{Message: m})
		}
	}
	return out
}

// sortToolResults orders the tool-result blocks of each user message as the
// calls of the most recent assistant message with tool calls; results whose
// ID matches no call sort as the first call. The sort is stable and leaves
// text blocks in place.
func sortToolResults(msgs []v4Message) {
	var order map[string]int
	for i := range msgs {
		m := &msgs[i]
		switch {
		case m.Role == RoleAssistant && len(m.ToolCalls) > 0:
			order = map[string]int{}
			for j, c := range m.ToolCalls {
				if c.ID != "" {
					order[c.ID] = j
				}
			}
		case m.Role == RoleUser && len(order) > 0:
			var results []v4Block
			for _, b := range m.blocks {
				if b.toolResult {
					results = append(results, b)
				}
			}
			if len(results) < 2 {
				continue
			}
			slices.SortStableFunc(results, func(a, b v4Block) int {
				return order[a.toolCallID] - order[b.toolCallID]
			})
			blocks := slices.Clone(m.blocks)
			k := 0
			for j := range blocks {
				if blocks[j].toolResult {
					blocks[j] = results[k]
					k++
				}
			}
			m.blocks = blocks
		}
	}
}

// lastUserIndex returns the index of the last user or developer message, or
// -1.
func lastUserIndex(msgs []v4Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if r := msgs[i].Role; r == RoleUser || r == RoleDeveloper {
			return i
		}
	}
	return -1
}

// dropEarlierReasoning removes what thinking mode does not show of the turns
// before the last user message: the reasoning of assistant messages, and
// developer messages altogether.
func dropEarlierReasoning(msgs []v4Message) []v4Message {
	last := lastUserIndex(msgs)
	out := make([]v4Message, 0, len(msgs))
	for i, m := range msgs {
		switch {
		case i >= last || m.Role == RoleUser || m.Role == RoleSystem || m.Role == RoleLatestReminder:
			out = append(out, m)
		case m.Role == RoleAssistant:
			m.ReasoningContent = ""
			out = append(out, m)
		}
	}
	return out
}

// v4Encoder renders merged messages.
type v4Encoder struct {
	b        strings.Builder
	msgs     []v4Message
	thinking bool
	drop     bool // reasoning before the last user message is dropped
	lastUser int
}

func (e *v4Encoder) render(i int) error {
	m := &e.msgs[i]
	b := &e.b
	switch m.Role {
	case RoleSystem:
		b.WriteString(m.Content)
		if err := e.writeToolsAndFormat(m); err != nil {
			return err
		}
	case RoleDeveloper:
		b.WriteString(tokUser)
		b.WriteString(m.Content)
		if err := e.writeToolsAndFormat(m); err != nil {
			return err
		}
	case RoleUser:
		b.WriteString(tokUser)
		for j, blk := range m.blocks {
			if j > 0 {
				b.WriteString("\n\n")
			}
			if blk.toolResult {
				b.WriteString("<tool_result>" + blk.text + "</tool_result>")
			} else {
				b.WriteString(blk.text)
			}
		}
	case RoleLatestReminder:
		b.WriteString(tokLatestReminder)
		b.WriteString(m.Content)
	case RoleAssistant:
		afterTask := i > 0 && e.msgs[i-1].Task != ""
		if e.thinking && !afterTask && (!e.drop || i > e.lastUser) {
			b.WriteString(m.ReasoningContent)
			b.WriteString(tokThinkEnd)
		}
		b.WriteString(m.Content)
		if len(m.ToolCalls) > 0 {
			b.WriteString("\n\n" + dsmlToolCalls + "\n")
			for j := range m.ToolCalls {
				if j > 0 {
					b.WriteByte('\n')
				}
				if err := writeDSMLInvoke(b, &m.ToolCalls[j]); err != nil {
					return err
				}
			}
			b.WriteString("\n" + dsmlToolCallsEnd)
		}
		if !m.WithoutEOS {
			b.WriteString(tokEOS)
		}
	default:
		return fmt.Errorf("chat: message %d: unknown role %q", i, m.Role)
	}

	// What opens the next turn: nothing when another message follows that
	// is not the reply, else the task token or the assistant's opening.
	if i+1 < len(e.msgs) {
		if next := e.msgs[i+1].Role; next != RoleAssistant && next != RoleLatestReminder {
			return nil
		}
	}
	switch {
	case m.Task != "":
		tok, _ := deepSeekV4TaskToken(m.Task)
		if m.Task == "action" {
			b.WriteString(tokAssistant)
			b.WriteString(e.thinkToken(true))
		}
		b.WriteString(tok)
	case m.Role == RoleUser || m.Role == RoleDeveloper:
		b.WriteString(tokAssistant)
		b.WriteString(e.thinkToken(i >= e.lastUser))
	}
	return nil
}

// thinkToken returns the token that opens an assistant turn: <think> in
// thinking mode for a turn whose reasoning is shown, </think> otherwise.
func (e *v4Encoder) thinkToken(current bool) string {
	if e.thinking && (!e.drop || current) {
		return tokThinkStart
	}
	return tokThinkEnd
}

func (e *v4Encoder) writeToolsAndFormat(m *v4Message) error {
	b := &e.b
	if len(m.Tools) > 0 {
		b.WriteString("\n\n" + toolsSectionHead)
		for j := range m.Tools {
			if j > 0 {
				b.WriteByte('\n')
			}
			fn, err := m.Tools[j].Function.object()
			if err != nil {
				return fmt.Errorf("chat: %w", err)
			}
			writePyJSON(b, fn)
		}
		b.WriteString(toolsSectionTail)
	}
	if len(m.ResponseFormat) > 0 {
		rf, err := parseJSON(m.ResponseFormat)
		if err != nil {
			return fmt.Errorf("chat: response format: %w", err)
		}
		b.WriteString("\n\n" + responseFormatHead)
		writePyJSON(b, rf)
	}
	return nil
}

// writeDSMLInvoke writes one call as a DSML invoke element: string
// arguments verbatim with string="true", others as JSON with string="false".
func writeDSMLInvoke(b *strings.Builder, c *ToolCall) error {
	args, err := c.arguments()
	if err != nil {
		return fmt.Errorf("chat: %w", err)
	}
	b.WriteString(dsmlInvoke + c.Name + "\">\n")
	for j, a := range args.members {
		if j > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(dsmlParam + a.key + "\" string=\"")
		if a.val.kind == jsonString {
			b.WriteString("true\">" + a.val.s)
		} else {
			b.WriteString("false\">")
			writePyJSON(b, a.val)
		}
		b.WriteString(dsmlParamEnd)
	}
	b.WriteString("\n" + dsmlInvokeEnd)
	return nil
}
