package chat

import (
	"fmt"
	"strings"
)

// DeepSeek-V3.2's tool section of a system or developer message (the
// reference encoder's TOOLS_SYSTEM_TEMPLATE, encoding/encoding_dsv32.py of
// the Hub repository): the tool schemas go between the two halves, one
// JSON object a line.
const (
	v32ToolsHead = "## Tools\n\n" +
		"You have access to a set of tools you can use to answer the user's question.\n" +
		"You can invoke functions by writing a \"" + "<" + dsml + "function_calls>" + "\" block like the following as part of your reply to the user:\n" +
		"<" + dsml + "function_calls>\n" +
		dsmlInvoke + "$FUNCTION_NAME\">\n" +
		dsmlParam + "$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE" + dsmlParamEnd + "\n" +
		"...\n" +
		dsmlInvokeEnd + "\n" +
		dsmlInvoke + "$FUNCTION_NAME2\">\n" +
		"...\n" +
		dsmlInvokeEnd + "\n" +
		"</" + dsml + "function_calls>\n\n" +
		"String and scalar parameters should be specified as is without any escaping or quotes, while lists and objects should use JSON format. The \"string\" attribute should be set to \"true\" for string type parameters and \"false\" for other types (numbers, booleans, arrays, objects).\n\n" +
		"If the thinking_mode is enabled, then after function results you should strongly consider outputting a thinking block. Here is an example:\n\n" +
		"<" + dsml + "function_calls>\n" +
		"...\n" +
		"</" + dsml + "function_calls>\n\n" +
		"<function_results>\n" +
		"...\n" +
		"</function_results>\n\n" +
		tokThinkStart + "...thinking about results" + tokThinkEnd + "\n\n" +
		"Here are the functions available in JSONSchema format:\n" +
		"<functions>\n"
	v32ToolsTail = "\n</functions>\n"

	v32DeveloperPrefix = "\n\n# The user's message is: "
)

// EncodeDeepSeekV32 renders a conversation as a DeepSeek-V3.2 prompt, byte
// for byte as DeepSeek's reference encoder (encoding_dsv32.py) does with
// add_default_bos_token: the BOS token, then every message:
//
//   - system: its content, then its tools and response format;
//   - user: "<｜User｜>content<｜Assistant｜>" and, in thinking mode for the
//     last user or developer message, "<think>" (else "</think>");
//   - developer: a user turn holding its tools, its response format and
//     "# The user's message is: " with its content;
//   - assistant: in thinking mode after the last user message its
//     reasoning and "</think>", then its content, its tool calls in a
//     DSML "function_calls" block, and the EOS token (left off with
//     WithoutEOS);
//   - tool: the results of the preceding assistant's calls, each in
//     <result> inside one <function_results> block, after which the next
//     think token opens the assistant's continuation.
//
// tools, if any, are placed on the first message when it is a system
// message (which must not carry tools of its own), and otherwise on an
// empty system message put first. In thinking mode, unless KeepReasoning,
// the turns before the last user message lose their reasoning and
// developer messages, as the reference's drop_thinking does.
// ReasoningEffort must be empty.
//
// EncodeDeepSeekV32 returns an error for a role DeepSeek-V3.2 does not
// have (latest_reminder), a task, an empty developer message, tool
// results that do not follow an assistant's calls, an assistant message
// after the last user message without reasoning or tool calls in thinking
// mode, and malformed tool-call arguments or tool parameters.
func EncodeDeepSeekV32(msgs []Message, tools []Tool, opt Options) (string, error) {
	if opt.ReasoningEffort != "" {
		return "", fmt.Errorf("chat: DeepSeek-V3.2 has no reasoning effort levels (got %q)", opt.ReasoningEffort)
	}
	for i := range msgs {
		if err := validateV32Message(&msgs[i]); err != nil {
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
	if opt.Thinking && !opt.KeepReasoning {
		msgs = dropV32Reasoning(msgs)
	}
	last := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if r := msgs[i].Role; r == RoleUser || r == RoleDeveloper {
			last = i
			break
		}
	}
	var b strings.Builder
	b.WriteString(tokBOS)
	think := func(current bool) string {
		if opt.Thinking && current {
			return tokThinkStart
		}
		return tokThinkEnd
	}
	for i := range msgs {
		m := &msgs[i]
		switch m.Role {
		case RoleSystem:
			b.WriteString(m.Content)
			if err := writeV32ToolsAndFormat(&b, m); err != nil {
				return "", err
			}
		case RoleDeveloper:
			b.WriteString(tokUser)
			if err := writeV32ToolsAndFormat(&b, m); err != nil {
				return "", err
			}
			b.WriteString(v32DeveloperPrefix + m.Content + tokAssistant + think(i == last))
		case RoleUser:
			b.WriteString(tokUser + m.Content + tokAssistant + think(i == last))
		case RoleTool:
			calls := i - 1
			for calls >= 0 && msgs[calls].Role == RoleTool {
				calls--
			}
			order := i - calls
			if calls < 0 || msgs[calls].Role != RoleAssistant || len(msgs[calls].ToolCalls) < order {
				return "", fmt.Errorf("chat: message %d: a tool result without a matching tool call of the assistant message before it", i)
			}
			if order == 1 {
				b.WriteString("\n\n<function_results>")
			}
			b.WriteString("\n<result>" + m.Content + "</result>")
			if order == len(msgs[calls].ToolCalls) {
				b.WriteString("\n</function_results>\n\n" + think(i >= last))
			}
		case RoleAssistant:
			if opt.Thinking && i > last {
				if m.ReasoningContent == "" && len(m.ToolCalls) == 0 {
					return "", fmt.Errorf("chat: message %d: in thinking mode an assistant message after the last user message needs reasoning or tool calls", i)
				}
				b.WriteString(m.ReasoningContent + tokThinkEnd)
			}
			b.WriteString(m.Content)
			if len(m.ToolCalls) > 0 {
				b.WriteString("\n\n" + v32Calls.open() + "\n")
				for j := range m.ToolCalls {
					if j > 0 {
						b.WriteByte('\n')
					}
					if err := writeDSMLInvoke(&b, &m.ToolCalls[j]); err != nil {
						return "", err
					}
				}
				b.WriteString("\n" + v32Calls.close())
			}
			if !m.WithoutEOS {
				b.WriteString(tokEOS)
			}
		}
	}
	return b.String(), nil
}

func validateV32Message(m *Message) error {
	switch m.Role {
	case RoleSystem, RoleUser, RoleAssistant, RoleTool:
	case RoleDeveloper:
		if m.Content == "" {
			return fmt.Errorf("a developer message needs content")
		}
	default:
		return fmt.Errorf("unknown role %q for DeepSeek-V3.2 (want system, developer, user, assistant or tool)", m.Role)
	}
	if m.Task != "" {
		return fmt.Errorf("DeepSeek-V3.2 has no quick instruction tasks (got %q)", m.Task)
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

// dropV32Reasoning is the reference's drop_thinking_messages: before the
// last user or developer message, assistant messages lose their reasoning
// and developer messages are left out.
func dropV32Reasoning(msgs []Message) []Message {
	last := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if r := msgs[i].Role; r == RoleUser || r == RoleDeveloper {
			last = i
			break
		}
	}
	out := make([]Message, 0, len(msgs))
	for i, m := range msgs {
		switch {
		case i >= last || m.Role == RoleUser || m.Role == RoleSystem || m.Role == RoleTool:
			out = append(out, m)
		case m.Role == RoleAssistant:
			m.ReasoningContent = ""
			out = append(out, m)
		}
	}
	return out
}

func writeV32ToolsAndFormat(b *strings.Builder, m *Message) error {
	if len(m.Tools) > 0 {
		b.WriteString("\n\n" + v32ToolsHead)
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
		b.WriteString(v32ToolsTail)
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

// ParseDeepSeekV32 reads a DeepSeek-V3.2 completion back into reasoning,
// content and tool calls, as ParseDeepSeekV4 reads a DeepSeek-V4 one (see
// there), the tool-call block being "<｜DSML｜function_calls>".
func ParseDeepSeekV32(completion string, thinking bool) (Parsed, error) {
	return parseDSMLReply(completion, thinking, v32Calls)
}

// NewDeepSeekV32StreamParser returns a StreamParser for one DeepSeek-V3.2
// completion: what ParseDeepSeekV32 reads, as it is generated.
func NewDeepSeekV32StreamParser(thinking bool) *StreamParser {
	return newStreamParser(thinking, v32Calls)
}
