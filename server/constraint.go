package server

import (
	"bytes"
	"encoding/json"

	"github.com/strata-inference/strata/tokenizer/chat"
)

// The Responses API's and Anthropic's spellings of structured output and
// forced tool calls, read into a structured (structured.go reads chat's
// and completions' response_format and tool_choice). What these decoders
// accept is enforced while decoding; what they refuse is a 400 naming the
// field. Whether the schema compiles and the chat format can write tool
// calls is decided when the grammar is built (Server.constraint), also as
// a 400 naming the field.

// decodeTextFormat reads the Responses API's text.format: {"type":
// "text"}, {"type": "json_object"} or {"type": "json_schema", "name",
// "schema", "description", "strict"} (the schema enforced whether strict
// or not).
func decodeTextFormat(raw json.RawMessage, out *structured) *apiError {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	typ, aerr := blockType(raw, "text.format")
	if aerr != nil {
		return aerr
	}
	switch typ {
	case "text", "json_object":
		var f struct {
			Type string `json:"type"`
		}
		if err := strictUnmarshal(raw, &f, "text.format"); err != nil {
			return err
		}
		if typ == "json_object" {
			out.format, out.formatParam = "json_object", "text.format"
		}
		return nil
	case "json_schema":
	default:
		return invalidf("text.format.type", "invalid_value", "text.format.type must be text, json_object or json_schema, not %q.", typ)
	}
	var f struct {
		Type        string          `json:"type"`
		Name        *string         `json:"name"`
		Schema      json.RawMessage `json:"schema"`
		Description *string         `json:"description"`
		Strict      *bool           `json:"strict"`
	}
	if err := strictUnmarshal(raw, &f, "text.format"); err != nil {
		return err
	}
	if f.Name == nil || !validName(*f.Name) {
		return invalidf("text.format.name", "invalid_value", "text.format.name must be 1 to %d letters, digits, '_' or '-'.", maxToolNameSize)
	}
	s := bytes.TrimSpace(f.Schema)
	if len(s) == 0 || string(s) == "null" {
		return invalidf("text.format.schema", "missing_required_parameter", "text.format.schema is required with type \"json_schema\".")
	}
	out.format, out.formatParam, out.schemaParam, out.schema = "json_schema", "text.format", "text.format.schema", s
	return nil
}

// decodeResponsesToolChoice reads the Responses API's tool_choice ("auto",
// "none", "required", or {"type": "function", "name": ...}) for the
// request's tools, and returns the tools to render ("none" renders none)
// and tool_choice as the response echoes it.
func decodeResponsesToolChoice(raw json.RawMessage, tools []chat.Tool, out *structured) ([]chat.Tool, json.RawMessage, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return tools, json.RawMessage(`"auto"`), nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto":
		case "none":
			tools = nil
		case "required":
			if len(tools) == 0 {
				return nil, nil, invalidf("tool_choice", "invalid_value", "tool_choice \"required\" needs at least one function tool in tools.")
			}
			out.calls = "required"
		default:
			return nil, nil, invalidf("tool_choice", "invalid_value", "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"name\": ...}, not %q.", s)
		}
		echo, _ := json.Marshal(s)
		return tools, echo, nil
	}
	typ, aerr := blockType(raw, "tool_choice")
	if aerr != nil {
		return nil, nil, aerr
	}
	if typ != "function" {
		return nil, nil, unsupported("tool_choice.type", "tool_choice of type %q is not supported; this server runs only function tools (tool_choice \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"name\": ...}).", typ)
	}
	var c struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := strictUnmarshal(raw, &c, "tool_choice"); err != nil {
		return nil, nil, err
	}
	if c.Name == "" {
		return nil, nil, invalidf("tool_choice.name", "missing_required_parameter", "tool_choice.name is required for a tool_choice of type function.")
	}
	if !hasTool(tools, c.Name) {
		return nil, nil, invalidf("tool_choice.name", "invalid_value", "tool_choice names function %q, which is not in tools.", c.Name)
	}
	out.calls, out.name = "function", c.Name
	echo, _ := json.Marshal(c)
	return tools, echo, nil
}

func hasTool(tools []chat.Tool, name string) bool {
	for _, t := range tools {
		if t.Function.Name == name {
			return true
		}
	}
	return false
}

// decodeAnthropicToolChoice reads Anthropic's tool_choice {"type": "auto"
// | "any" | "tool" | "none", "name", "disable_parallel_tool_use"} for the
// request's tools, and returns the tools to render ("none" renders none).
func decodeAnthropicToolChoice(c *anthropicChoiceJSON, tools []chat.Tool, out *structured) ([]chat.Tool, *apiError) {
	out.parallel = true
	if c == nil {
		return tools, nil
	}
	if c.DisableParallelToolUse != nil && *c.DisableParallelToolUse {
		out.parallel = false
	}
	if c.Name != "" && c.Type != "tool" {
		return nil, invalidf("tool_choice.name", "invalid_value", "tool_choice.name is only for tool_choice of type tool.")
	}
	switch c.Type {
	case "auto":
	case "none":
		tools = nil
	case "any":
		if len(tools) == 0 {
			return nil, invalidf("tool_choice", "invalid_value", "tool_choice of type any needs at least one tool in tools.")
		}
		out.calls = "required"
	case "tool":
		if c.Name == "" {
			return nil, invalidf("tool_choice.name", "missing_required_parameter", "tool_choice of type tool needs a name.")
		}
		if !hasTool(tools, c.Name) {
			return nil, invalidf("tool_choice.name", "invalid_value", "tool_choice names tool %q, which is not in tools.", c.Name)
		}
		out.calls, out.name = "function", c.Name
	default:
		return nil, invalidf("tool_choice.type", "invalid_value", "tool_choice.type must be auto, any, tool or none, not %q.", c.Type)
	}
	return tools, nil
}

// decodeOutputFormat reads Anthropic's output_config.format: {"type":
// "json_schema", "schema": ...}.
func decodeOutputFormat(raw json.RawMessage, out *structured) *apiError {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	typ, aerr := blockType(raw, "output_config.format")
	if aerr != nil {
		return aerr
	}
	if typ != "json_schema" {
		return invalidf("output_config.format.type", "invalid_value", "output_config.format.type must be \"json_schema\", not %q.", typ)
	}
	var f struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	}
	if err := strictUnmarshal(raw, &f, "output_config.format"); err != nil {
		return err
	}
	s := bytes.TrimSpace(f.Schema)
	if len(s) == 0 || string(s) == "null" {
		return invalidf("output_config.format.schema", "missing_required_parameter", "output_config.format.schema is required.")
	}
	out.format, out.formatParam, out.schemaParam, out.schema = "json_schema", "output_config.format", "output_config.format.schema", s
	return nil
}
