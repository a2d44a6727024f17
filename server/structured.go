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

// Structured output: every API's way of asking for JSON output or a
// forced tool call (chat's and completions' response_format and
// tool_choice, the Responses API's text.format and tool_choice, Anthropic's
// output_config.format and tool_choice; constraint.go reads the latter
// two) and strict tools become one structured value, which becomes a
// grammar that the engine enforces token by token (engine.Constraint, a
// grammar.Matcher per choice). Compiled grammars are cached per server by
// what the request asked, so that repeated schemas pay for compilation and
// for their token masks once.
//
// The JSON is compact (no insignificant whitespace), as OpenAI's
// structured outputs are. Where a chat format's replies begin with
// reasoning (thinking mode; MiniMax's template always opens <think>) the
// reasoning is free up to its end marker ("</think>", Gemma 4's special
// "<channel|>"); the constraint applies to the answer after it. A forced tool
// call is the chat format's tool-call markup (DSML for DeepSeek-V4, the
// template's XML for Qwen3.5) whose arguments follow the tool's parameter
// schema. Constrained requests are generated where they are submitted,
// never handed to a decode worker, and do not speculate.

// structured is what a request asks its output to be.
type structured struct {
	// format is "", "json_object" or "json_schema"; schema is the
	// json_schema's schema (nil: any JSON value).
	format string
	schema json.RawMessage
	// formatParam is the field that asked for format (response_format,
	// text.format or output_config.format), schemaParam the schema's.
	formatParam, schemaParam string
	// calls is "" (tool calls are the model's choice), "required" (one or
	// more calls of the tools) or "function" (one call of name).
	calls    string
	name     string
	parallel bool // more than one call allowed ("required" and auto)
	maxCalls int  // at most this many calls (0: no bound but parallel's)
	// strict names the tools whose calls follow their parameter schema
	// even when calling is the model's choice (a tool's strict: true). A
	// request with such a tool among its tools is constrained: its reply
	// is free text, then possibly tool calls whose arguments follow the
	// schema for strict tools and are free for the others. A forced call
	// follows its tool's schema whether the tool is strict or not.
	strict map[string]bool
}

// none reports whether st asks nothing of the reply of a request with
// these tools.
func (st *structured) none(tools []chat.Tool) bool {
	return st.format == "" && st.calls == "" && !st.anyStrict(tools)
}

// anyStrict reports whether one of tools is strict.
func (st *structured) anyStrict(tools []chat.Tool) bool {
	for _, t := range tools {
		if st.strict[t.Function.Name] {
			return true
		}
	}
	return false
}

// markStrict records that the tool name is strict.
func (st *structured) markStrict(name string) {
	if st.strict == nil {
		st.strict = map[string]bool{}
	}
	st.strict[name] = true
}

// callLimit is the most calls a reply may make (0: no bound).
func (st *structured) callLimit() int {
	if !st.parallel {
		return 1
	}
	return st.maxCalls
}

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
		out.format, out.formatParam = "json_object", "response_format"
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
	out.format, out.formatParam, out.schemaParam = "json_schema", "response_format", "response_format.json_schema.schema"
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

// prefixGrammarFormat is a chat format whose replies may begin with
// something before the answer (the reasoning, up to its end marker), which
// its reply parser reads apart from the content: a constrained reply is
// that prefix, free, then the constrained answer. A format whose parser
// reads reasoning and that has no prefix grammar would read a constrained
// answer as reasoning.
type prefixGrammarFormat interface {
	// replyPrefix is the grammar of what comes before the answer (the
	// reasoning in thinking mode); nil when nothing does.
	replyPrefix(opt ChatOptions) grammar.Expr
}

// grammarMarkerFormat is a SpecialMarkup chat format whose reply grammars
// write markers its tokenizer holds as special tokens (Gemma 4's
// "<channel|>", which closes the thought channel): the grammars'
// vocabulary holds those special tokens, which a grammar otherwise never
// allows.
type grammarMarkerFormat interface {
	grammarMarkers() []string
}

// toolGrammarFormat is a chat format that can constrain a reply: what
// precedes the answer, free content, and a block of tool calls, each as
// the format's reply parser reads it.
type toolGrammarFormat interface {
	prefixGrammarFormat
	// replyContent is the grammar of free content, which a block of tool
	// calls may follow.
	replyContent() grammar.Expr
	// toolCallsGrammar is a reply's block of tool calls.
	toolCallsGrammar(g chat.ToolCallGrammar) (grammar.Expr, error)
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
		// The special tokens the format's grammars write, as their text
		// (chat replies in a SpecialMarkup format keep special tokens).
		sm, special := s.format.(SpecialMarkup)
		if mf, ok := s.format.(grammarMarkerFormat); ok && special && sm.MarkupIsSpecial() {
			for _, m := range mf.grammarMarkers() {
				if id, ok := s.tok.TokenID(m); ok && int(id) < len(texts) && s.tok.IsSpecial(id) {
					texts[id] = m
				}
			}
		}
		c.vocab = grammar.NewVocabulary(texts)
	})
	return c.vocab
}

// constraint returns what makes each choice's constraint for what st asks
// of a reply (chat: a reply in the server's chat format, with these tools;
// otherwise plain text), or nil when st asks nothing of it. A request it
// cannot honour is a 400 naming the field that asked.
func (s *Server) constraint(st *structured, tools []chat.Tool, opt ChatOptions, isChat bool) (func() engine.Constraint, *apiError) {
	if !isChat {
		tools = nil
	}
	if st.none(tools) {
		return nil, nil
	}
	var key strings.Builder
	fmt.Fprintf(&key, "%s\x00%s\x00%s\x00%d\x00%v\x00%v\x00", st.format, st.calls, st.name, st.callLimit(), isChat, opt.Thinking)
	key.Write(st.schema)
	for _, t := range tools {
		b, _ := json.Marshal(t)
		fmt.Fprintf(&key, "\x00%v\x00%s", st.strict[t.Function.Name], b)
	}
	c := &s.structured
	c.mu.Lock()
	ix, cached := c.index[key.String()]
	c.mu.Unlock()
	if !cached {
		x, aerr := s.replyGrammar(st, tools, opt, isChat)
		if aerr != nil {
			return nil, aerr
		}
		if x != nil {
			g, err := grammar.Compile(x)
			if err != nil {
				return nil, invalidf(paramOf(st), "invalid_value", "The requested output cannot be compiled into a grammar: %v.", err)
			}
			ix = grammar.NewIndex(g, s.grammarVocab())
		}
		c.mu.Lock()
		if c.index == nil || len(c.index) >= maxCachedGrammars {
			c.index = map[string]*grammar.Index{}
		}
		c.index[key.String()] = ix
		c.mu.Unlock()
	}
	if ix == nil {
		return nil, nil
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

// paramOf names the field that asked for what st asks.
func paramOf(st *structured) string {
	switch {
	case st.calls != "":
		return "tool_choice"
	case st.format != "":
		return st.formatParam
	}
	return "tools"
}

// replyGrammar composes the grammar of the whole reply; nil when nothing
// needs to be enforced (strict tools with a chat format whose replies
// never carry tool calls).
func (s *Server) replyGrammar(st *structured, tools []chat.Tool, opt ChatOptions, isChat bool) (grammar.Expr, *apiError) {
	tg, canCall := s.format.(toolGrammarFormat)
	if !isChat {
		tg, canCall = nil, false
	}
	// calls is a block of calls of sel, at most maxCalls (0: any number);
	// forced calls follow every tool's schema, others a strict tool's.
	calls := func(sel []chat.Tool, maxCalls int, forced bool) (grammar.Expr, *apiError) {
		g := chat.ToolCallGrammar{Tools: sel, MaxCalls: maxCalls, JSON: jsonWhitespace}
		if !forced {
			g.Free = make([]bool, len(sel))
			for i, t := range sel {
				g.Free[i] = !st.strict[t.Function.Name]
			}
		}
		x, err := tg.toolCallsGrammar(g)
		if err != nil {
			return nil, schemaError("tools", err)
		}
		return x, nil
	}
	var body grammar.Expr
	switch {
	case st.calls == "required" || st.calls == "function":
		if !canCall {
			return nil, unsupported("tool_choice", "tool_choice forcing %s is not supported with the %s chat format: it has no known tool-call syntax to constrain the reply to (tool_choice auto is).", forcedName(st), s.format.Name())
		}
		sel, maxCalls := tools, st.callLimit()
		if st.calls == "function" {
			sel, maxCalls = nil, 1
			for _, t := range tools {
				if t.Function.Name == st.name {
					sel = append(sel, t)
				}
			}
		}
		var aerr *apiError
		if body, aerr = calls(sel, maxCalls, true); aerr != nil {
			return nil, aerr
		}
	case st.format != "":
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
				return nil, schemaError(st.schemaParam, err)
			}
			if x, err = sc.Value(); err != nil {
				return nil, schemaError(st.schemaParam, err)
			}
		}
		body = x
		if canCall && len(tools) > 0 {
			// tool_choice "auto": the answer, or tool calls instead.
			c, aerr := calls(tools, st.callLimit(), false)
			if aerr != nil {
				return nil, aerr
			}
			body = grammar.Alt(body, c)
		}
	default: // strict tools, tool_choice "auto": content, then maybe calls
		if !canCall || len(tools) == 0 {
			return nil, nil
		}
		c, aerr := calls(tools, st.callLimit(), false)
		if aerr != nil {
			return nil, aerr
		}
		body = grammar.Seq(tg.replyContent(), grammar.Optional(c))
	}
	if pf, ok := s.format.(prefixGrammarFormat); ok && isChat {
		if p := pf.replyPrefix(opt); p != nil {
			body = grammar.Seq(p, body)
		}
	}
	return body, nil
}

// forcedName says what a forced tool_choice forces, in words every API's
// users read alike (chat's "required" is Anthropic's "any").
func forcedName(st *structured) string {
	if st.calls == "function" {
		return fmt.Sprintf("a call of %q", st.name)
	}
	return "a tool call"
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
