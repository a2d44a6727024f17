package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/strata-inference/strata/tokenizer/chat"
)

// messagesRequest is a validated POST /v1/messages (or count_tokens)
// request of Anthropic's Messages API.
type messagesRequest struct {
	genParams
	// Messages is the conversation as chat messages: the system prompt
	// first, tool results as tool messages.
	Messages []chat.Message
	Tools    []chat.Tool
	// SingleToolCall keeps a reply's first tool call only
	// (disable_parallel_tool_use).
	SingleToolCall bool
	Chat           ChatOptions
	// Prefilled: the last message is the assistant's, which the reply
	// continues (its text is not repeated in the response).
	Prefilled bool
	// OmitThinking leaves the thinking text out of the response
	// (thinking.display "omitted"); the signature still carries it.
	OmitThinking bool
	// Structured is what the reply must be: output_config.format, a
	// forced tool_choice (any, tool) and strict tools (constraint.go).
	Structured structured
}

type messagesRequestJSON struct {
	Model         *string                `json:"model"`
	MaxTokens     *int                   `json:"max_tokens"`
	Messages      []anthropicMessageJSON `json:"messages"`
	System        json.RawMessage        `json:"system"`
	StopSequences []string               `json:"stop_sequences"`
	Stream        *bool                  `json:"stream"`
	Temperature   *float64               `json:"temperature"`
	TopP          *float64               `json:"top_p"`
	TopK          *int                   `json:"top_k"`
	Tools         []json.RawMessage      `json:"tools"`
	ToolChoice    *anthropicChoiceJSON   `json:"tool_choice"`
	Thinking      *anthropicThinkingJSON `json:"thinking"`
	Metadata      *struct {
		UserID *string `json:"user_id"`
	} `json:"metadata"`
	ServiceTier  *string `json:"service_tier"`
	OutputConfig *struct {
		Effort *string          `json:"effort"`
		Format *json.RawMessage `json:"format"`
	} `json:"output_config"`
	// cache_control marks where Anthropic would cache the prompt; strata's
	// prefix cache finds shared prefixes by itself.
	CacheControl json.RawMessage `json:"cache_control"`
}

type anthropicMessageJSON struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anthropicChoiceJSON struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse *bool  `json:"disable_parallel_tool_use"`
}

type anthropicThinkingJSON struct {
	Type         string  `json:"type"`
	BudgetTokens *int    `json:"budget_tokens"`
	Display      *string `json:"display"`
}

// Content blocks, by type. cache_control is accepted on each (see above).
type (
	textBlockJSON struct {
		Type         string          `json:"type"`
		Text         *string         `json:"text"`
		CacheControl json.RawMessage `json:"cache_control"`
		Citations    json.RawMessage `json:"citations"`
	}
	toolUseBlockJSON struct {
		Type         string          `json:"type"`
		ID           string          `json:"id"`
		Name         string          `json:"name"`
		Input        json.RawMessage `json:"input"`
		CacheControl json.RawMessage `json:"cache_control"`
	}
	toolResultBlockJSON struct {
		Type         string          `json:"type"`
		ToolUseID    string          `json:"tool_use_id"`
		Content      json.RawMessage `json:"content"`
		IsError      *bool           `json:"is_error"`
		CacheControl json.RawMessage `json:"cache_control"`
	}
	thinkingBlockJSON struct {
		Type         string          `json:"type"`
		Thinking     *string         `json:"thinking"`
		Signature    *string         `json:"signature"`
		CacheControl json.RawMessage `json:"cache_control"`
	}
	anthropicToolJSON struct {
		Type         string          `json:"type"`
		Name         string          `json:"name"`
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"input_schema"`
		CacheControl json.RawMessage `json:"cache_control"`
		Strict       *bool           `json:"strict"`
	}
)

// thinkingSignaturePrefix starts the signatures strata gives thinking
// blocks: the base64 of the thinking text, so that a block sent back with
// its text omitted still renders the reasoning. It is an encoding, not a
// secret.
const thinkingSignaturePrefix = "strata1."

func thinkingSignature(text string) string {
	return thinkingSignaturePrefix + base64.StdEncoding.EncodeToString([]byte(text))
}

// strictUnmarshal decodes raw into v, refusing fields v does not have;
// param names raw in errors.
func strictUnmarshal(raw json.RawMessage, v any, param string) *apiError {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, err := dec.Token(); err != io.EOF {
			return invalidf(param, "invalid_json", "%s has data after its value.", param)
		}
		return nil
	}
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typ) && typ.Field != "":
		return invalidf(param+"."+typ.Field, "invalid_type", "%s.%s must be %s, not %s.", param, typ.Field, jsonKind(typ.Type.Kind().String()), typ.Value)
	case errors.As(err, &typ):
		return invalidf(param, "invalid_type", "%s must be %s, not %s.", param, jsonKind(typ.Type.Kind().String()), typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return invalidf(param+"."+field, "unsupported_parameter", "%s has the field %q, which this server does not support.", param, field)
	}
	return invalidf(param, "invalid_json", "%s: %v.", param, err)
}

// blockType reads the type of a content block.
func blockType(raw json.RawMessage, param string) (string, *apiError) {
	var b struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(raw, &b) != nil {
		return "", invalidf(param, "invalid_type", "%s must be a content block object.", param)
	}
	if b.Type == "" {
		return "", invalidf(param+".type", "missing_required_parameter", "%s.type is required.", param)
	}
	return b.Type, nil
}

// decodeMessagesRequest decodes and validates a Messages API request;
// countOnly is for count_tokens, which has no max_tokens and no sampling.
// It does not check the model name or the context length.
func decodeMessagesRequest(data []byte, countOnly bool) (*messagesRequest, *apiError) {
	var j messagesRequestJSON
	if err := decodeJSON(data, &j); err != nil {
		return nil, err
	}
	req := &messagesRequest{}
	if j.Model == nil || *j.Model == "" {
		return nil, invalidf("model", "missing_required_parameter", "model is required.")
	}
	req.Model = *j.Model
	req.N, req.Logprobs, req.SkipSpecial = 1, -1, true
	if countOnly {
		for _, f := range []struct {
			name string
			set  bool
		}{{"max_tokens", j.MaxTokens != nil}, {"stream", j.Stream != nil}, {"stop_sequences", j.StopSequences != nil},
			{"temperature", j.Temperature != nil}, {"top_p", j.TopP != nil}, {"top_k", j.TopK != nil},
			{"metadata", j.Metadata != nil}, {"service_tier", j.ServiceTier != nil}} {
			if f.set {
				return nil, invalidf(f.name, "unsupported_parameter", "count_tokens does not take %s.", f.name)
			}
		}
	} else {
		if j.MaxTokens == nil {
			return nil, invalidf("max_tokens", "missing_required_parameter", "max_tokens is required.")
		}
		var err *apiError
		if req.MaxTokens, err = maxTokensParam("max_tokens", j.MaxTokens); err != nil {
			return nil, err
		}
	}
	req.Stream = j.Stream != nil && *j.Stream
	s := &req.Sampling
	s.Temperature = 1 // Anthropic's default
	if v := j.Temperature; v != nil {
		if !(*v >= 0 && *v <= 1) {
			return nil, invalidf("temperature", "invalid_value", "temperature must be between 0 and 1, not %g.", *v)
		}
		s.Temperature = *v
	}
	if v := j.TopP; v != nil {
		if !(*v > 0 && *v <= 1) {
			return nil, invalidf("top_p", "invalid_value", "top_p must be greater than 0 and at most 1, not %g.", *v)
		}
		s.TopP = *v
	}
	if v := j.TopK; v != nil {
		if *v < 0 {
			return nil, invalidf("top_k", "invalid_value", "top_k must be at least 0, not %d.", *v)
		}
		s.TopK = *v
	}
	if len(j.StopSequences) > maxStops {
		return nil, invalidf("stop_sequences", "invalid_value", "stop_sequences has %d strings; at most %d are allowed.", len(j.StopSequences), maxStops)
	}
	for i, st := range j.StopSequences {
		if st == "" || len(st) > maxStopBytes {
			return nil, invalidf(fmt.Sprintf("stop_sequences[%d]", i), "invalid_value", "each stop sequence must have 1 to %d bytes; stop_sequences[%d] has %d.", maxStopBytes, i, len(st))
		}
	}
	req.Stop = j.StopSequences
	if j.Metadata != nil && j.Metadata.UserID != nil {
		req.User = *j.Metadata.UserID
	}
	if v := j.ServiceTier; v != nil && *v != "auto" && *v != "standard_only" {
		return nil, invalidf("service_tier", "invalid_value", "service_tier must be \"auto\" or \"standard_only\", not %q.", *v)
	}
	if err := decodeAnthropicThinking(&j, req); err != nil {
		return nil, err
	}
	if err := decodeAnthropicTools(&j, req); err != nil {
		return nil, err
	}
	if err := decodeAnthropicConversation(&j, req); err != nil {
		return nil, err
	}
	if req.Prefilled && req.Structured.format != "" {
		return nil, unsupported("output_config.format", "output_config.format cannot be used with a prefilled last assistant message: the document would have to continue the prefilled text, which the schema does not describe.")
	}
	if err := req.Sampling.Validate(); err != nil {
		return nil, invalidf("", "invalid_value", "%v.", err)
	}
	return req, nil
}

// decodeAnthropicThinking reads thinking and output_config.
func decodeAnthropicThinking(j *messagesRequestJSON, req *messagesRequest) *apiError {
	if t := j.Thinking; t != nil {
		switch t.Type {
		case "enabled":
			if t.BudgetTokens == nil {
				return invalidf("thinking.budget_tokens", "missing_required_parameter", "thinking.budget_tokens is required when thinking is enabled.")
			}
			// The budget is a target, as Anthropic documents it: strata
			// does not end the reasoning there; max_tokens bounds it.
			if b := *t.BudgetTokens; b < 1024 || (j.MaxTokens != nil && b >= *j.MaxTokens) {
				return invalidf("thinking.budget_tokens", "invalid_value", "thinking.budget_tokens must be at least 1024 and less than max_tokens, not %d.", b)
			}
			req.Chat.Thinking = true
		case "adaptive":
			if t.BudgetTokens != nil {
				return invalidf("thinking.budget_tokens", "invalid_value", "thinking.budget_tokens is only for thinking of type enabled.")
			}
			req.Chat.Thinking = true
		case "disabled":
			if t.BudgetTokens != nil || t.Display != nil {
				return invalidf("thinking", "invalid_value", "thinking of type disabled takes no other fields.")
			}
		default:
			return invalidf("thinking.type", "invalid_value", "thinking.type must be enabled, adaptive or disabled, not %q.", t.Type)
		}
		if d := t.Display; d != nil {
			switch *d {
			case "summarized":
				// There is no summarizer: the thinking shown is the reasoning.
			case "omitted":
				req.OmitThinking = true
			default:
				return invalidf("thinking.display", "invalid_value", "thinking.display must be summarized or omitted, not %q.", *d)
			}
		}
	}
	if oc := j.OutputConfig; oc != nil {
		if f := oc.Format; f != nil {
			if err := decodeOutputFormat(*f, &req.Structured); err != nil {
				return err
			}
		}
		if e := oc.Effort; e != nil {
			switch *e {
			case "low", "medium", "high":
				req.Chat.ReasoningEffort = "high"
			case "xhigh", "max":
				req.Chat.ReasoningEffort = "max"
			default:
				return invalidf("output_config.effort", "invalid_value", "output_config.effort must be low, medium, high, xhigh or max, not %q.", *e)
			}
		}
	}
	if !req.Chat.Thinking {
		req.Chat.ReasoningEffort = "" // DeepSeek-V4's effort levels apply to thinking
	}
	return nil
}

// decodeAnthropicTools reads tools (strict: true makes a tool's calls
// follow its input_schema) and tool_choice (disable_parallel_tool_use
// allows one call).
func decodeAnthropicTools(j *messagesRequestJSON, req *messagesRequest) *apiError {
	for i, raw := range j.Tools {
		param := fmt.Sprintf("tools[%d]", i)
		var t anthropicToolJSON
		var typ struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(raw, &typ) == nil && typ.Type != "" && typ.Type != "custom" {
			return unsupported(param+".type", "%s is a server tool of type %q; this server runs only client tools (custom tools with an input_schema).", param, typ.Type)
		}
		if err := strictUnmarshal(raw, &t, param); err != nil {
			return err
		}
		ct := chat.Tool{Type: "function", Function: chat.ToolFunction{Name: t.Name, Description: t.Description, Parameters: t.InputSchema}}
		if err := checkTool(&ct, i); err != nil {
			err.Param = strings.Replace(err.Param, ".function.parameters", ".input_schema", 1)
			err.Param = strings.Replace(err.Param, ".function.", ".", 1)
			return err
		}
		if len(bytes.TrimSpace(t.InputSchema)) == 0 {
			return invalidf(param+".input_schema", "missing_required_parameter", "%s.input_schema is required.", param)
		}
		if t.Strict != nil && *t.Strict {
			req.Structured.markStrict(t.Name)
		}
		req.Tools = append(req.Tools, ct)
	}
	var err *apiError
	if req.Tools, err = decodeAnthropicToolChoice(j.ToolChoice, req.Tools, &req.Structured); err != nil {
		return err
	}
	req.SingleToolCall = !req.Structured.parallel
	return nil
}

// decodeAnthropicConversation reads system and messages into chat
// messages.
func decodeAnthropicConversation(j *messagesRequestJSON, req *messagesRequest) *apiError {
	if sys := bytes.TrimSpace(j.System); len(sys) > 0 && string(sys) != "null" {
		text, err := anthropicText(sys, "system")
		if err != nil {
			return err
		}
		req.Messages = append(req.Messages, chat.Message{Role: chat.RoleSystem, Content: text})
	}
	if len(j.Messages) == 0 {
		return invalidf("messages", "missing_required_parameter", "messages must hold at least one message.")
	}
	if j.Messages[0].Role != "user" {
		return invalidf("messages[0].role", "invalid_value", "the first message must be the user's.")
	}
	for i, m := range j.Messages {
		param := fmt.Sprintf("messages[%d]", i)
		blocks, err := anthropicBlocks(m.Content, param+".content")
		if err != nil {
			return err
		}
		switch m.Role {
		case "user":
			if err := userTurn(blocks, param, &req.Messages); err != nil {
				return err
			}
		case "assistant":
			msg, err := assistantTurn(blocks, param)
			if err != nil {
				return err
			}
			req.Messages = append(req.Messages, msg)
		case "":
			return invalidf(param+".role", "missing_required_parameter", "%s.role is required.", param)
		default:
			return invalidf(param+".role", "invalid_value", "%s.role must be user or assistant, not %q.", param, m.Role)
		}
	}
	if last := &req.Messages[len(req.Messages)-1]; last.Role == chat.RoleAssistant {
		if len(last.ToolCalls) > 0 {
			return invalidf(fmt.Sprintf("messages[%d]", len(j.Messages)-1), "invalid_value", "the last message may be the assistant's to continue, but not with tool_use blocks: their results must follow.")
		}
		last.WithoutEOS = true
		req.Prefilled = true
	}
	return nil
}

// anthropicBlocks reads content: a string (one text block) or an array of
// blocks, returned raw.
func anthropicBlocks(raw json.RawMessage, param string) ([]json.RawMessage, *apiError) {
	raw = bytes.TrimSpace(raw)
	var s string
	if json.Unmarshal(raw, &s) == nil {
		b, _ := json.Marshal(map[string]string{"type": "text", "text": s})
		return []json.RawMessage{b}, nil
	}
	var blocks []json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &blocks) != nil {
		return nil, invalidf(param, "invalid_type", "%s must be a string or an array of content blocks.", param)
	}
	return blocks, nil
}

// anthropicText reads a string or an array of text blocks (system, or a
// tool result's content) as one text, the blocks joined by newlines.
func anthropicText(raw json.RawMessage, param string) (string, *apiError) {
	blocks, err := anthropicBlocks(raw, param)
	if err != nil {
		return "", err
	}
	texts := make([]string, len(blocks))
	for i, b := range blocks {
		bp := fmt.Sprintf("%s[%d]", param, i)
		typ, err := blockType(b, bp)
		if err != nil {
			return "", err
		}
		if typ != "text" {
			return "", unsupported(bp+".type", "%s: blocks of type %q are not supported here; only text.", bp, typ)
		}
		var t textBlockJSON
		if err := strictUnmarshal(b, &t, bp); err != nil {
			return "", err
		}
		if t.Text == nil {
			return "", invalidf(bp+".text", "missing_required_parameter", "a text block needs text.")
		}
		texts[i] = *t.Text
	}
	return strings.Join(texts, "\n"), nil
}

// userTurn appends a user message's blocks: tool results as tool messages,
// runs of text blocks as one user message, in their order.
func userTurn(blocks []json.RawMessage, param string, out *[]chat.Message) *apiError {
	var text []string
	flush := func() {
		if text != nil {
			*out = append(*out, chat.Message{Role: chat.RoleUser, Content: strings.Join(text, "\n")})
			text = nil
		}
	}
	for i, b := range blocks {
		bp := fmt.Sprintf("%s.content[%d]", param, i)
		typ, err := blockType(b, bp)
		if err != nil {
			return err
		}
		switch typ {
		case "text":
			var t textBlockJSON
			if err := strictUnmarshal(b, &t, bp); err != nil {
				return err
			}
			if t.Text == nil {
				return invalidf(bp+".text", "missing_required_parameter", "a text block needs text.")
			}
			text = append(text, *t.Text)
		case "tool_result":
			var t toolResultBlockJSON
			if err := strictUnmarshal(b, &t, bp); err != nil {
				return err
			}
			if t.ToolUseID == "" {
				return invalidf(bp+".tool_use_id", "missing_required_parameter", "a tool_result block needs tool_use_id.")
			}
			content := ""
			if c := bytes.TrimSpace(t.Content); len(c) > 0 && string(c) != "null" {
				if content, err = anthropicText(c, bp+".content"); err != nil {
					return err
				}
			}
			if t.IsError != nil && *t.IsError {
				// chat.Message has no error flag on tool results, so no
				// chat format can render one: say it in the content.
				content = "Error: " + content
			}
			flush()
			*out = append(*out, chat.Message{Role: chat.RoleTool, ToolCallID: t.ToolUseID, Content: content})
		default:
			return unsupported(bp+".type", "%s: user content blocks of type %q are not supported; only text and tool_result.", bp, typ)
		}
	}
	if len(blocks) == 0 {
		text = []string{""}
	}
	flush()
	return nil
}

// assistantTurn reads an assistant message's blocks: thinking, text and
// tool_use.
func assistantTurn(blocks []json.RawMessage, param string) (chat.Message, *apiError) {
	m := chat.Message{Role: chat.RoleAssistant}
	var text, reasoning []string
	for i, b := range blocks {
		bp := fmt.Sprintf("%s.content[%d]", param, i)
		typ, err := blockType(b, bp)
		if err != nil {
			return m, err
		}
		switch typ {
		case "text":
			var t textBlockJSON
			if err := strictUnmarshal(b, &t, bp); err != nil {
				return m, err
			}
			if t.Text == nil {
				return m, invalidf(bp+".text", "missing_required_parameter", "a text block needs text.")
			}
			text = append(text, *t.Text)
		case "thinking":
			var t thinkingBlockJSON
			if err := strictUnmarshal(b, &t, bp); err != nil {
				return m, err
			}
			r := ""
			if t.Thinking != nil {
				r = *t.Thinking
			}
			if r == "" && t.Signature != nil {
				if enc, ok := strings.CutPrefix(*t.Signature, thinkingSignaturePrefix); ok {
					dec, err := base64.StdEncoding.DecodeString(enc)
					if err != nil {
						return m, invalidf(bp+".signature", "invalid_value", "%s.signature is not one this server made.", bp)
					}
					r = string(dec)
				}
			}
			reasoning = append(reasoning, r)
		case "tool_use":
			var t toolUseBlockJSON
			if err := strictUnmarshal(b, &t, bp); err != nil {
				return m, err
			}
			if t.ID == "" || t.Name == "" {
				return m, invalidf(bp, "missing_required_parameter", "a tool_use block needs an id and a name.")
			}
			args := strings.TrimSpace(string(t.Input))
			if args == "" || args == "null" {
				args = "{}"
			}
			if !isJSONObject(args) {
				return m, invalidf(bp+".input", "invalid_value", "%s.input must be a JSON object.", bp)
			}
			m.ToolCalls = append(m.ToolCalls, chat.ToolCall{ID: t.ID, Name: t.Name, Arguments: args})
		default:
			return m, unsupported(bp+".type", "%s: assistant content blocks of type %q are not supported; only text, thinking and tool_use.", bp, typ)
		}
	}
	m.Content = strings.Join(text, "\n")
	m.ReasoningContent = strings.Join(reasoning, "\n")
	return m, nil
}
