package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Roles a Message may have.
const (
	RoleSystem         = "system"
	RoleDeveloper      = "developer"
	RoleUser           = "user"
	RoleAssistant      = "assistant"
	RoleTool           = "tool"
	RoleLatestReminder = "latest_reminder"
)

// Message is one turn of a conversation in the OpenAI chat shape, with the
// extensions DeepSeek-V4's encoding knows. It decodes from and encodes to
// the OpenAI JSON field names; content must be a string or null.
type Message struct {
	// Role is one of the Role constants.
	Role string `json:"role"`
	// Content is the text of the turn; for a tool message, the tool's result.
	Content string `json:"content"`
	// ReasoningContent is an assistant turn's reasoning (its thinking).
	ReasoningContent string `json:"reasoning_content,omitempty"`
	// ToolCalls are the calls an assistant turn made.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID names the call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Name is the optional participant or tool name. DeepSeek-V4's encoding
	// ignores it; templates may use it.
	Name string `json:"name,omitempty"`

	// Tools, on a system or developer message, are rendered into that
	// message (DeepSeek-V4); other messages' tools are not rendered.
	// EncodeDeepSeekV4's tools argument is placed on the first system
	// message.
	Tools []Tool `json:"tools,omitempty"`
	// ResponseFormat, on a system or developer message, is a JSON schema
	// the reply must follow (DeepSeek-V4).
	ResponseFormat json.RawMessage `json:"response_format,omitempty"`
	// Task names one of DeepSeek-V4's quick instruction tasks (action,
	// query, authority, domain, title, read_url); the reply to this message
	// is that task's output rather than a normal answer.
	Task string `json:"task,omitempty"`
	// WithoutEOS leaves the end-of-sentence token off an assistant turn, so
	// that the prompt ends inside it and generation continues the turn.
	WithoutEOS bool `json:"wo_eos,omitempty"`
}

// ToolCall is one function call made by the assistant.
//
// Its JSON form is OpenAI's: {"id", "type": "function", "function": {"name",
// "arguments"}}. When decoding, arguments given as a JSON object instead of a
// string are accepted and kept as their JSON text.
type ToolCall struct {
	// ID identifies the call; tool messages refer to it. Parsers leave it
	// empty: the server assigns one.
	ID string
	// Name is the function's name.
	Name string
	// Arguments is the text of a JSON object holding the arguments.
	Arguments string
}

type toolCallJSON struct {
	ID       string `json:"id,omitempty"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// MarshalJSON encodes c in OpenAI's tool-call shape.
func (c ToolCall) MarshalJSON() ([]byte, error) {
	var j toolCallJSON
	j.ID, j.Type, j.Function.Name = c.ID, "function", c.Name
	args, err := json.Marshal(c.Arguments)
	if err != nil {
		return nil, err
	}
	j.Function.Arguments = args
	return json.Marshal(j)
}

// UnmarshalJSON decodes OpenAI's tool-call shape.
func (c *ToolCall) UnmarshalJSON(data []byte) error {
	var j toolCallJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*c = ToolCall{ID: j.ID, Name: j.Function.Name}
	raw := bytes.TrimSpace(j.Function.Arguments)
	switch {
	case len(raw) == 0 || string(raw) == "null":
	case raw[0] == '"':
		return json.Unmarshal(raw, &c.Arguments)
	default:
		c.Arguments = string(raw)
	}
	return nil
}

// Tool is a tool definition in OpenAI's shape.
type Tool struct {
	// Type is "function".
	Type     string       `json:"type"`
	Function ToolFunction `json:"function"`
}

// ToolFunction describes a callable function.
//
// Prompts embed the function object as JSON. A ToolFunction built in code
// renders its keys in the order name, description, parameters, leaving out
// an empty description and absent parameters. One decoded with
// encoding/json renders the object it was decoded from instead, with its
// key order and any further keys (such as "strict"), as a Python reference
// implementation given the same request would; modifying the fields after
// decoding switches back to rendering from the fields.
type ToolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`

	decoded *decodedFunction
}

// decodedFunction is the object a ToolFunction was decoded from, and the
// field values it decoded to.
type decodedFunction struct {
	raw               []byte
	name, description string
	parameters        []byte
}

// UnmarshalJSON decodes the function object and remembers it for rendering.
func (f *ToolFunction) UnmarshalJSON(data []byte) error {
	type plain ToolFunction
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*f = ToolFunction(p)
	f.decoded = &decodedFunction{
		raw:         bytes.Clone(data),
		name:        p.Name,
		description: p.Description,
		parameters:  bytes.Clone(p.Parameters),
	}
	return nil
}

// object returns the function object to render, keys in order.
func (f *ToolFunction) object() (jsonValue, error) {
	if d := f.decoded; d != nil && d.name == f.Name && d.description == f.Description &&
		bytes.Equal(d.parameters, f.Parameters) {
		return parseJSON(d.raw)
	}
	obj := jsonValue{kind: jsonObject}
	obj.members = append(obj.members, jsonMember{"name", jsonValue{kind: jsonString, s: f.Name}})
	if f.Description != "" {
		obj.members = append(obj.members, jsonMember{"description", jsonValue{kind: jsonString, s: f.Description}})
	}
	if len(bytes.TrimSpace(f.Parameters)) > 0 {
		params, err := parseJSON(f.Parameters)
		if err != nil {
			return jsonValue{}, fmt.Errorf("parameters of tool %q: %w", f.Name, err)
		}
		obj.members = append(obj.members, jsonMember{"parameters", params})
	}
	return obj, nil
}

// object returns the tool object {"type", "function"} to render.
func (t *Tool) object() (jsonValue, error) {
	fn, err := t.Function.object()
	if err != nil {
		return jsonValue{}, err
	}
	typ := t.Type
	if typ == "" {
		typ = "function"
	}
	return jsonValue{kind: jsonObject, members: []jsonMember{
		{"type", jsonValue{kind: jsonString, s: typ}},
		{"function", fn},
	}}, nil
}

// arguments parses c.Arguments, which must be a JSON object; empty or
// all-blank text stands for no arguments.
func (c *ToolCall) arguments() (jsonValue, error) {
	if strings.TrimSpace(c.Arguments) == "" {
		return jsonValue{kind: jsonObject}, nil
	}
	v, err := parseJSON([]byte(c.Arguments))
	if err != nil {
		return jsonValue{}, fmt.Errorf("tool call %q: arguments are not valid JSON: %w", c.Name, err)
	}
	if v.kind != jsonObject {
		return jsonValue{}, fmt.Errorf("tool call %q: arguments are not a JSON object: %.40q", c.Name, c.Arguments)
	}
	return v, nil
}
