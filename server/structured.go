package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/strata-inference/strata/engine"
	"github.com/strata-inference/strata/grammar"
	"github.com/strata-inference/strata/tokenizer/chat"
)

// Structured output: response_format (json_object, json_schema) and a
// forced tool_choice ("required", or a named function) become a grammar
// that the engine enforces token by token (engine.Constraint, a
// grammar.Matcher per choice). Compiled grammars are cached per server by
// what the request asked, so that repeated schemas pay for compilation and
// for their token masks once.
//
// The JSON is compact (no insignificant whitespace), as OpenAI's
// structured outputs are. In DeepSeek-V4's thinking mode the reasoning is
// free up to "</think>"; the constraint applies to the answer after it. A
// forced tool call is DSML markup whose arguments follow the tool's
// parameter schema. Constrained requests are generated where they are
// submitted, never handed to a decode worker.

// structured is what a request asks its output to be.
type structured struct {
	// format is "", "json_object" or "json_schema"; schema is the
	// json_schema's schema (nil: any JSON value).
	format string
	schema json.RawMessage
	// calls is "" (tool calls are the model's choice), "required" (one or
	// more calls of the tools) or "function" (one call of name).
	calls    string
	name     string
	parallel bool // more than one call allowed ("required" only)
}

func (st *structured) none() bool { return st.format == "" && st.calls == "" }

// jsonWhitespace is the server's JSON layout: compact.
var jsonWhitespace = grammar.Options{}

// decodeResponseFormat reads response_format: {"type": "text" |
// "json_object" | "json_schema", "json_schema": {"name", "schema",
// "description", "strict"}}.
func decodeResponseFormat(raw json.RawMessage, out *structured) *apiError {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var f struct {
		Type       *string          `json:"type"`
		JSONSchema *json.RawMessage `json:"json_schema"`
	}
	if json.Unmarshal(raw, &f) != nil {
		return invalidf("response_format", "invalid_type", "response_format must be an object with a type.")
	}
	if f.Type == nil {
		return invalidf("response_format.type", "missing_required_parameter", "response_format.type is required.")
	}
	switch *f.Type {
	case "text":
		if f.JSONSchema != nil {
			return invalidf("response_format.json_schema", "invalid_value", "response_format.json_schema is only allowed with type \"json_schema\".")
		}
		return nil
	case "json_object":
		if f.JSONSchema != nil {
			return invalidf("response_format.json_schema", "invalid_value", "response_format.json_schema is only allowed with type \"json_schema\".")
		}
		out.format = "json_object"
		return nil
	case "json_schema":
	default:
		return invalidf("response_format.type", "invalid_value", "response_format.type must be \"text\", \"json_object\" or \"json_schema\", not %q.", *f.Type)
	}
	if f.JSONSchema == nil {
		return invalidf("response_format.json_schema", "missing_required_parameter", "response_format.json_schema is required with type \"json_schema\".")
	}
	var js struct {
		Name        *string         `json:"name"`
		Description *string         `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict"`
	}
	if json.Unmarshal(*f.JSONSchema, &js) != nil {
		return invalidf("response_format.json_schema", "invalid_type", "response_format.json_schema must be an object with a name and a schema.")
	}
	if js.Name == nil || !validName(*js.Name) {
		return invalidf("response_format.json_schema.name", "invalid_value", "response_format.json_schema.name must be 1 to %d letters, digits, '_' or '-'.", maxToolNameSize)
	}
	out.format = "json_schema"
	if s := bytes.TrimSpace(js.Schema); len(s) > 0 && string(s) != "null" {
		out.schema = s
	}
	return nil
}

func validName(name string) bool {
	return name != "" && len(name) <= maxToolNameSize && strings.IndexFunc(name, func(r rune) bool {
		return !(r == '_' || r == '-' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9'))
	}) < 0
}

// decodeToolChoice reads tool_choice ("auto", "none", "required", or
// {"type": "function", "function": {"name": ...}}) for the request's
// tools, and returns the tools to render ("none" renders none).
// parallel is parallel_tool_calls (default true).
func decodeToolChoice(raw json.RawMessage, tools []chat.Tool, parallel *bool, out *structured) ([]chat.Tool, *apiError) {
	out.parallel = parallel == nil || *parallel
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return tools, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto":
			return tools, nil
		case "none":
			return nil, nil
		case "required":
			if len(tools) == 0 {
				return nil, invalidf("tool_choice", "invalid_value", "tool_choice \"required\" needs at least one tool in tools.")
			}
			out.calls = "required"
			return tools, nil
		}
		return nil, invalidf("tool_choice", "invalid_value", "tool_choice must be \"auto\", \"none\", \"required\" or a function, not %q.", s)
	}
	var c struct {
		Type     string `json:"type"`
		Function *struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &c) != nil {
		return nil, invalidf("tool_choice", "invalid_type", "tool_choice must be a string or {\"type\": \"function\", \"function\": {\"name\": ...}}.")
	}
	if c.Type != "function" {
		return nil, unsupported("tool_choice.type", "tool_choice of type %q is not supported; use \"function\".", c.Type)
	}
	if c.Function == nil || c.Function.Name == "" {
		return nil, invalidf("tool_choice.function.name", "missing_required_parameter", "tool_choice.function.name is required.")
	}
	for _, t := range tools {
		if t.Function.Name == c.Function.Name {
			out.calls, out.name = "function", c.Function.Name
			return tools, nil
		}
	}
	return nil, invalidf("tool_choice.function.name", "invalid_value", "tool_choice names function %q, which is not in tools.", c.Function.Name)
}

// toolGrammarFormat is a chat format that can constrain a reply: what
// precedes the answer, and a block of tool calls.
type toolGrammarFormat interface {
	// replyPrefix is the grammar of what comes before the answer (the
	// reasoning in thinking mode); nil when nothing does.
	replyPrefix(opt ChatOptions) grammar.Expr
	// toolCallsGrammar is a reply's block of one to maxCalls (0: any
	// number) calls of tools.
	toolCallsGrammar(tools []chat.Tool, maxCalls int) (grammar.Expr, error)
}

func (deepSeekV4) replyPrefix(opt ChatOptions) grammar.Expr {
	if opt.Thinking {
		return chat.DeepSeekV4Reasoning()
	}
	return nil
}

func (deepSeekV4) toolCallsGrammar(tools []chat.Tool, maxCalls int) (grammar.Expr, error) {
	return chat.DeepSeekV4ToolCalls(tools, maxCalls, jsonWhitespace)
}

// structuredCache holds a server's compiled grammars, bound to its
// tokenizer's vocabulary (built on first use).
type structuredCache struct {
	once  sync.Once
	vocab *grammar.Vocabulary
	mu    sync.Mutex
	index map[string]*grammar.Index
}

// maxCachedGrammars bounds the grammars a server keeps; beyond it the
// cache starts over.
const maxCachedGrammars = 64

func (s *Server) grammarVocab() *grammar.Vocabulary {
	c := &s.structured
	c.once.Do(func() {
		texts := make([]string, s.eng.Model().VocabSize())
		for id := range min(len(texts), s.tok.VocabSize()) {
			if !s.tok.IsSpecial(int32(id)) {
				texts[id], _ = s.tok.TokenBytes(int32(id))
			}
		}
		c.vocab = grammar.NewVocabulary(texts)
	})
	return c.vocab
}

// constraint returns what makes each choice's constraint for what st asks
// (chat: a reply in the server's chat format, with tools; otherwise plain
// text), or nil when st asks nothing.
func (s *Server) constraint(st *structured, tools []chat.Tool, opt ChatOptions, isChat bool) (func() engine.Constraint, *apiError) {
	if st.none() {
		return nil, nil
	}
	var key strings.Builder
	fmt.Fprintf(&key, "%s\x00%s\x00%s\x00%v\x00%v\x00%v\x00", st.format, st.calls, st.name, st.parallel, isChat, opt.Thinking)
	key.Write(st.schema)
	if isChat && len(tools) > 0 {
		t, _ := json.Marshal(tools)
		key.Write(t)
	}
	c := &s.structured
	c.mu.Lock()
	ix := c.index[key.String()]
	c.mu.Unlock()
	if ix == nil {
		x, aerr := s.replyGrammar(st, tools, opt, isChat)
		if aerr != nil {
			return nil, aerr
		}
		g, err := grammar.Compile(x)
		if err != nil {
			return nil, invalidf(paramOf(st), "invalid_value", "The requested output cannot be compiled into a grammar: %v.", err)
		}
		ix = grammar.NewIndex(g, s.grammarVocab())
		c.mu.Lock()
		if c.index == nil || len(c.index) >= maxCachedGrammars {
			c.index = map[string]*grammar.Index{}
		}
		c.index[key.String()] = ix
		c.mu.Unlock()
	}
	return func() engine.Constraint { return ix.NewMatcher() }, nil
}

// constrain gives each request a constraint from mk (nil: none).
func constrain(reqs []engine.Request, mk func() engine.Constraint) {
	if mk == nil {
		return
	}
	for i := range reqs {
		reqs[i].Constraint = mk()
	}
}

func paramOf(st *structured) string {
	if st.calls != "" {
		return "tool_choice"
	}
	return "response_format"
}

// replyGrammar composes the grammar of the whole reply.
func (s *Server) replyGrammar(st *structured, tools []chat.Tool, opt ChatOptions, isChat bool) (grammar.Expr, *apiError) {
	tg, canCall := s.format.(toolGrammarFormat)
	if !isChat {
		tg, canCall = nil, false
	}
	calls := func(sel []chat.Tool, maxCalls int) (grammar.Expr, *apiError) {
		x, err := tg.toolCallsGrammar(sel, maxCalls)
		if err != nil {
			return nil, schemaError("tools", err)
		}
		return x, nil
	}
	var body grammar.Expr
	switch st.calls {
	case "required", "function":
		if !canCall {
			return nil, unsupported("tool_choice", "tool_choice %q is not supported with the %s chat format: it has no known tool-call syntax.", st.calls, s.format.Name())
		}
		sel, maxCalls := tools, 0
		if !st.parallel {
			maxCalls = 1
		}
		if st.calls == "function" {
			sel, maxCalls = nil, 1
			for _, t := range tools {
				if t.Function.Name == st.name {
					sel = append(sel, t)
				}
			}
		}
		var aerr *apiError
		if body, aerr = calls(sel, maxCalls); aerr != nil {
			return nil, aerr
		}
	default:
		var x grammar.Expr
		switch st.format {
		case "json_object":
			x = grammar.JSONObject(jsonWhitespace)
		case "json_schema":
			schema := st.schema
			if schema == nil {
				schema = json.RawMessage("true")
			}
			sc, err := grammar.ParseSchema(schema, jsonWhitespace)
			if err != nil {
				return nil, schemaError("response_format.json_schema.schema", err)
			}
			if x, err = sc.Value(); err != nil {
				return nil, schemaError("response_format.json_schema.schema", err)
			}
		}
		body = x
		if canCall && len(tools) > 0 {
			// tool_choice "auto": the answer, or tool calls instead.
			maxCalls := 0
			if !st.parallel {
				maxCalls = 1
			}
			c, aerr := calls(tools, maxCalls)
			if aerr != nil {
				return nil, aerr
			}
			body = grammar.Alt(body, c)
		}
	}
	if canCall {
		if p := tg.replyPrefix(opt); p != nil {
			body = grammar.Seq(p, body)
		}
	}
	return body, nil
}

// schemaError is the 400 for a schema the grammar compiler refuses,
// naming the keyword when it is one it does not support.
func schemaError(param string, err error) *apiError {
	var se *grammar.SchemaError
	if errors.As(err, &se) && se.Keyword != "" {
		if errors.Is(err, grammar.ErrUnsupported) {
			return unsupported(param, "%s: the JSON Schema keyword %q is not supported (%v).", param, se.Keyword, err)
		}
		return invalidf(param, "invalid_value", "%s: keyword %q: %v.", param, se.Keyword, err)
	}
	return invalidf(param, "invalid_value", "%s: %v.", param, err)
}
