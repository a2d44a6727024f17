package server

import (
	"encoding/json"
	"fmt"
)

// A constraint is what a request asks its output to follow beyond the
// model's own choice: a JSON value, a JSON schema, or a tool call (any
// tool, or a named one). Every API's decoder turns its own spelling of
// these (OpenAI's response_format, text.format and tool_choice, Anthropic's
// tool_choice and output_config.format) into a constraint and hands it to
// checkConstraint, the one place that decides whether the server can
// honour it.
type constraint struct {
	Kind   constraintKind
	Schema json.RawMessage // constrainSchema: the schema
	Tool   string          // constrainTool: the function's name
}

type constraintKind int

const (
	constrainJSON    constraintKind = iota + 1 // any JSON object
	constrainSchema                            // a value valid under Schema
	constrainAnyTool                           // at least one tool call
	constrainTool                              // a call of Tool
)

func (k constraintKind) String() string {
	switch k {
	case constrainJSON:
		return "JSON output"
	case constrainSchema:
		return "JSON-schema output"
	case constrainAnyTool:
		return "a required tool call"
	case constrainTool:
		return "a call of a named tool"
	}
	return fmt.Sprintf("constraint %d", int(k))
}

// checkConstraint decides whether a request's constraint can be honoured.
// Constrained decoding (a grammar over the vocabulary, applied as a
// per-step token mask) is not built yet, so every constraint is refused
// with a 400 naming the field that asked for it; nothing is ever accepted
// and left unenforced. When constrained decoding exists, this is the
// switch: it returns nil for what it supports and the handlers pass the
// constraint on to the engine request.
func checkConstraint(param string, c constraint) *apiError {
	return unsupported(param, "%s asks for %s, which needs constrained decoding; this server does not have it yet.", param, c.Kind)
}
