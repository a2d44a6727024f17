package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/strata-inference/strata/engine"
	"github.com/strata-inference/strata/tokenizer/chat"
)

// Limits every request is held to when it is decoded. The server's own
// options (Options.MaxChoices, the context length) are checked afterwards.
const (
	maxN            = 128 // n
	maxStops        = 16  // stop strings
	maxStopBytes    = 256 // bytes of one stop string
	maxTopLogprobs  = 20  // top_logprobs, and logprobs of /v1/completions
	maxPrompts      = 128 // prompts of one /v1/completions request
	maxToolNameSize = 64
	maxStopTokens   = 64   // stop_token_ids
	maxLogitBias    = 1024 // logit_bias entries
)

// genParams are the generation parameters both endpoints share.
type genParams struct {
	Model        string
	Stream       bool
	IncludeUsage bool
	// MaxTokens is the most tokens to generate per choice; 0 when the
	// request does not say.
	MaxTokens int
	// Sampling holds the sampling parameters; its Seed is left zero and set
	// per choice from Seed.
	Sampling engine.Sampling
	N        int
	// HasSeed says whether the request gave a seed; Seed is it.
	HasSeed bool
	Seed    int64
	Stop    []string
	// StopTokens end a choice when generated (stop_token_ids); IncludeStop
	// keeps the stop string or stop token's text in the output.
	StopTokens  []int32
	IncludeStop bool
	// MinTokens is the fewest tokens a choice generates before EOS or a
	// stop token may end it.
	MinTokens int
	// Logprobs is how many top alternatives to return with each token's
	// log-probability, or -1 for no log-probabilities.
	Logprobs    int
	IgnoreEOS   bool
	SkipSpecial bool
	// User identifies the end user (user, safety_identifier); it goes to
	// the access log.
	User string
	// Structured is what the output must be (response_format, and for
	// chat a forced tool_choice); structured.go.
	Structured structured
}

// chatRequest is a validated POST /v1/chat/completions request.
type chatRequest struct {
	genParams
	Messages []chat.Message
	// Tools are rendered into the prompt; none when tool_choice is "none".
	Tools []chat.Tool
	// SingleToolCall keeps only a reply's first tool call
	// (parallel_tool_calls false).
	SingleToolCall bool
	Chat           ChatOptions
}

// prompt is one prompt of a /v1/completions request: text, or token ids.
type prompt struct {
	Text     string
	Tokens   []int32
	IsTokens bool
}

// completionRequest is a validated POST /v1/completions request.
type completionRequest struct {
	genParams
	Prompts []prompt
	Echo    bool
}

// paramsJSON are the request fields both endpoints share. Pointers tell an
// absent (or null) field from a zero one.
type paramsJSON struct {
	Model             *string            `json:"model"`
	Stream            *bool              `json:"stream"`
	StreamOptions     *streamOptionsJSON `json:"stream_options"`
	Temperature       *float64           `json:"temperature"`
	TopP              *float64           `json:"top_p"`
	TopK              *int               `json:"top_k"`
	MinP              *float64           `json:"min_p"`
	RepetitionPenalty *float64           `json:"repetition_penalty"`
	PresencePenalty   *float64           `json:"presence_penalty"`
	FrequencyPenalty  *float64           `json:"frequency_penalty"`
	N                 *int               `json:"n"`
	Seed              *int64             `json:"seed"`
	Stop              json.RawMessage    `json:"stop"`
	LogitBias         map[string]float64 `json:"logit_bias"`
	IgnoreEOS         *bool              `json:"ignore_eos"`
	SkipSpecialTokens *bool              `json:"skip_special_tokens"`
	StopTokenIDs      []int64            `json:"stop_token_ids"`
	IncludeStopStr    *bool              `json:"include_stop_str_in_output"`
	MinTokens         *int               `json:"min_tokens"`
	User              *string            `json:"user"`
	ResponseFormat    json.RawMessage    `json:"response_format"`
}

type streamOptionsJSON struct {
	IncludeUsage       *bool `json:"include_usage"`
	IncludeObfuscation *bool `json:"include_obfuscation"`
}

type chatRequestJSON struct {
	paramsJSON
	Messages            []messageJSON              `json:"messages"`
	MaxTokens           *int                       `json:"max_tokens"`
	MaxCompletionTokens *int                       `json:"max_completion_tokens"`
	Logprobs            *bool                      `json:"logprobs"`
	TopLogprobs         *int                       `json:"top_logprobs"`
	Tools               []chat.Tool                `json:"tools"`
	ToolChoice          json.RawMessage            `json:"tool_choice"`
	ParallelToolCalls   *bool                      `json:"parallel_tool_calls"`
	ReasoningEffort     *string                    `json:"reasoning_effort"`
	Thinking            *thinkingJSON              `json:"thinking"`
	ChatTemplateKwargs  map[string]json.RawMessage `json:"chat_template_kwargs"`
	Store               *bool                      `json:"store"`
	ServiceTier         *string                    `json:"service_tier"`
	Modalities          []string                   `json:"modalities"`
	PromptCacheKey      *string                    `json:"prompt_cache_key"`
	SafetyIdentifier    *string                    `json:"safety_identifier"`
}

type thinkingJSON struct {
	Type string `json:"type"`
}

type messageJSON struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ReasoningContent *string         `json:"reasoning_content"`
	ToolCalls        []chat.ToolCall `json:"tool_calls"`
	ToolCallID       string          `json:"tool_call_id"`
	Name             string          `json:"name"`
	// What the SDKs send back with an assistant message they received:
	// accepted when empty.
	Refusal      *string         `json:"refusal"`
	Annotations  json.RawMessage `json:"annotations"`
	Audio        json.RawMessage `json:"audio"`
	FunctionCall json.RawMessage `json:"function_call"`
}

type completionRequestJSON struct {
	paramsJSON
	Prompt    json.RawMessage `json:"prompt"`
	MaxTokens *int            `json:"max_tokens"`
	Logprobs  *int            `json:"logprobs"`
	Echo      *bool           `json:"echo"`
	Suffix    *string         `json:"suffix"`
	BestOf    *int            `json:"best_of"`
}

// utf8BOM is the byte order mark some clients put before a JSON body.
const utf8BOM = "\xef\xbb\xbf"

// decodeJSON decodes data, which must hold exactly one JSON object in
// valid UTF-8 (a leading byte order mark is allowed), into v. A field v
// does not know is an error: the server never ignores what it was asked.
func decodeJSON(data []byte, v any) *apiError {
	data = bytes.TrimPrefix(data, []byte(utf8BOM))
	if len(bytes.TrimSpace(data)) == 0 {
		return invalidf("", "invalid_json", "The request body is empty; want a JSON object.")
	}
	if !utf8.Valid(data) {
		off := 0
		for off < len(data) {
			r, n := utf8.DecodeRune(data[off:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			off += n
		}
		return invalidf("", "invalid_json", "The request body is not valid UTF-8 (at byte %d).", off)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return invalidf("", "invalid_json", "The request body is not valid JSON: %v (at byte %d).", syn, syn.Offset)
		case errors.As(err, &typ) && typ.Field == "":
			return invalidf("", "invalid_json", "The request body must be a JSON object, not %s.", typ.Value)
		case errors.As(err, &typ):
			field := strings.TrimPrefix(typ.Field, "paramsJSON.") // the embedded shared fields
			return invalidf(field, "invalid_type", "%s must be %s, not %s.", field, jsonKind(typ.Type.Kind().String()), typ.Value)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return invalidf("", "invalid_json", "The request body is not valid JSON: it ends early.")
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return invalidf(field, "unsupported_parameter", "The request has the field %q, which this server does not support (it rejects fields it would otherwise ignore).", field)
		default:
			return invalidf("", "invalid_json", "The request body could not be decoded: %v.", err)
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return invalidf("", "invalid_json", "The request body has data after its JSON object.")
	}
	return nil
}

// jsonKind names a Go kind as the JSON type a client should send.
func jsonKind(kind string) string {
	switch {
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "uint"):
		return "an integer"
	case strings.HasPrefix(kind, "float"):
		return "a number"
	case kind == "string":
		return "a string"
	case kind == "bool":
		return "a boolean"
	case kind == "slice", kind == "array":
		return "an array"
	case kind == "struct", kind == "map", kind == "ptr":
		return "an object"
	}
	return "of another type"
}

// decodeParams validates the shared fields; token ids (logit_bias,
// stop_token_ids) must be below vocab.
func decodeParams(p *paramsJSON, out *genParams, vocab int) *apiError {
	if p.Model == nil || *p.Model == "" {
		return invalidf("model", "missing_required_parameter", "model is required.")
	}
	out.Model = *p.Model
	out.Stream = p.Stream != nil && *p.Stream
	if p.StreamOptions != nil {
		if !out.Stream {
			return invalidf("stream_options", "invalid_value", "stream_options is only allowed when stream is true.")
		}
		out.IncludeUsage = p.StreamOptions.IncludeUsage != nil && *p.StreamOptions.IncludeUsage
		if v := p.StreamOptions.IncludeObfuscation; v != nil && *v {
			return unsupported("stream_options.include_obfuscation", "stream_options.include_obfuscation is not supported: this server does not pad stream events.")
		}
	}
	s := &out.Sampling
	s.Temperature = 1 // OpenAI's default
	if v := p.Temperature; v != nil {
		if !(*v >= 0 && *v <= 2) {
			return invalidf("temperature", "invalid_value", "temperature must be between 0 and 2, not %g.", *v)
		}
		s.Temperature = *v
	}
	if v := p.TopP; v != nil {
		if !(*v > 0 && *v <= 1) {
			return invalidf("top_p", "invalid_value", "top_p must be greater than 0 and at most 1, not %g.", *v)
		}
		s.TopP = *v
	}
	if v := p.TopK; v != nil {
		if *v < -1 {
			return invalidf("top_k", "invalid_value", "top_k must be -1 or 0 (all tokens) or positive, not %d.", *v)
		}
		s.TopK = max(*v, 0)
	}
	if v := p.MinP; v != nil {
		if !(*v >= 0 && *v <= 1) {
			return invalidf("min_p", "invalid_value", "min_p must be between 0 and 1, not %g.", *v)
		}
		s.MinP = *v
	}
	if v := p.RepetitionPenalty; v != nil {
		if !(*v > 0 && *v <= 10) {
			return invalidf("repetition_penalty", "invalid_value", "repetition_penalty must be greater than 0 and at most 10, not %g.", *v)
		}
		s.RepetitionPenalty = *v
	}
	if v := p.PresencePenalty; v != nil {
		if !(*v >= -2 && *v <= 2) {
			return invalidf("presence_penalty", "invalid_value", "presence_penalty must be between -2 and 2, not %g.", *v)
		}
		s.PresencePenalty = *v
	}
	if v := p.FrequencyPenalty; v != nil {
		if !(*v >= -2 && *v <= 2) {
			return invalidf("frequency_penalty", "invalid_value", "frequency_penalty must be between -2 and 2, not %g.", *v)
		}
		s.FrequencyPenalty = *v
	}
	out.N = 1
	if v := p.N; v != nil {
		if *v < 1 || *v > maxN {
			return invalidf("n", "invalid_value", "n must be between 1 and %d, not %d.", maxN, *v)
		}
		out.N = *v
	}
	if p.Seed != nil {
		out.HasSeed, out.Seed = true, *p.Seed
	}
	stops, err := decodeStop(p.Stop)
	if err != nil {
		return err
	}
	out.Stop = stops
	if err := decodeLogitBias(p.LogitBias, vocab, s); err != nil {
		return err
	}
	if len(p.StopTokenIDs) > maxStopTokens {
		return invalidf("stop_token_ids", "invalid_value", "stop_token_ids has %d ids; at most %d are allowed.", len(p.StopTokenIDs), maxStopTokens)
	}
	if len(p.StopTokenIDs) > 0 {
		ids, err := tokenIDs(p.StopTokenIDs, vocab, "stop_token_ids")
		if err != nil {
			return err
		}
		out.StopTokens = ids
	}
	out.IncludeStop = p.IncludeStopStr != nil && *p.IncludeStopStr
	if v := p.MinTokens; v != nil {
		if *v < 0 {
			return invalidf("min_tokens", "invalid_value", "min_tokens must be at least 0, not %d.", *v)
		}
		out.MinTokens = *v
	}
	if p.User != nil {
		out.User = *p.User
	}
	out.IgnoreEOS = p.IgnoreEOS != nil && *p.IgnoreEOS
	out.SkipSpecial = true
	if p.SkipSpecialTokens != nil {
		out.SkipSpecial = *p.SkipSpecialTokens
	}
	return decodeResponseFormat(p.ResponseFormat, &out.Structured)
}

// decodeLogitBias reads logit_bias: token ids (as JSON object keys) to
// biases in [-100, 100].
func decodeLogitBias(m map[string]float64, vocab int, s *engine.Sampling) *apiError {
	if len(m) == 0 {
		return nil
	}
	if len(m) > maxLogitBias {
		return invalidf("logit_bias", "invalid_value", "logit_bias has %d entries; at most %d are allowed.", len(m), maxLogitBias)
	}
	s.LogitBias = make(map[int32]float32, len(m))
	for k, b := range m {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil || id < 0 || id >= int64(vocab) {
			return invalidf("logit_bias", "invalid_value", "logit_bias keys must be token ids below %d, not %q.", vocab, k)
		}
		if !(b >= -engine.MaxLogitBias && b <= engine.MaxLogitBias) {
			return invalidf("logit_bias", "invalid_value", "logit_bias of token %d must be between -%d and %d, not %g.", id, engine.MaxLogitBias, engine.MaxLogitBias, b)
		}
		s.LogitBias[int32(id)] = float32(b)
	}
	return nil
}

// decodeStop reads stop: null, a string or an array of strings.
func decodeStop(raw json.RawMessage) ([]string, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var list []string
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		list = []string{one}
	} else if err := json.Unmarshal(raw, &list); err != nil {
		return nil, invalidf("stop", "invalid_type", "stop must be a string or an array of strings.")
	}
	if len(list) > maxStops {
		return nil, invalidf("stop", "invalid_value", "stop has %d strings; at most %d are allowed.", len(list), maxStops)
	}
	for i, s := range list {
		if s == "" || len(s) > maxStopBytes {
			return nil, invalidf(fmt.Sprintf("stop[%d]", i), "invalid_value", "each stop string must have 1 to %d bytes; stop[%d] has %d.", maxStopBytes, i, len(s))
		}
	}
	return list, nil
}

// maxTokensParam checks a max_tokens value.
func maxTokensParam(name string, v *int) (int, *apiError) {
	if v == nil {
		return 0, nil
	}
	if *v < 1 {
		return 0, invalidf(name, "invalid_value", "%s must be at least 1, not %d.", name, *v)
	}
	return *v, nil
}

// decodeChatRequest decodes and validates a chat completions request body.
// It does not check the model name or the context length.
func decodeChatRequest(data []byte, vocab int) (*chatRequest, *apiError) {
	var j chatRequestJSON
	if err := decodeJSON(data, &j); err != nil {
		return nil, err
	}
	req := &chatRequest{}
	if err := decodeParams(&j.paramsJSON, &req.genParams, vocab); err != nil {
		return nil, err
	}
	var err *apiError
	if req.MaxTokens, err = maxTokensParam("max_tokens", j.MaxTokens); err != nil {
		return nil, err
	}
	if j.MaxCompletionTokens != nil {
		if req.MaxTokens, err = maxTokensParam("max_completion_tokens", j.MaxCompletionTokens); err != nil {
			return nil, err
		}
	}
	req.Logprobs = -1
	if j.Logprobs != nil && *j.Logprobs {
		req.Logprobs = 0
	}
	if v := j.TopLogprobs; v != nil {
		switch {
		case *v < 0 || *v > maxTopLogprobs:
			return nil, invalidf("top_logprobs", "invalid_value", "top_logprobs must be between 0 and %d, not %d.", maxTopLogprobs, *v)
		case req.Logprobs < 0 && *v > 0:
			return nil, invalidf("top_logprobs", "invalid_value", "top_logprobs needs logprobs set to true.")
		case req.Logprobs >= 0:
			req.Logprobs = *v
		}
	}
	if req.Messages, req.Tools, err = decodeConversation(j.Messages, j.Tools); err != nil {
		return nil, err
	}
	if err := decodeStrictTools(data, &req.Structured); err != nil {
		return nil, err
	}
	if req.Tools, err = decodeToolChoice(j.ToolChoice, req.Tools, j.ParallelToolCalls, &req.Structured); err != nil {
		return nil, err
	}
	if v := j.ParallelToolCalls; v != nil {
		req.SingleToolCall = !*v
	}
	if v := j.Store; v != nil && *v {
		return nil, unsupported("store", "store true is not supported: this server does not store chat completions.")
	}
	if v := j.ServiceTier; v != nil && *v != "auto" && *v != "default" {
		return nil, unsupported("service_tier", "service_tier must be \"auto\" or \"default\" (this server has one tier), not %q.", *v)
	}
	for i, m := range j.Modalities {
		if m != "text" {
			return nil, unsupported(fmt.Sprintf("modalities[%d]", i), "only the text modality is supported, not %q.", m)
		}
	}
	if v := j.SafetyIdentifier; v != nil && req.User == "" {
		req.User = *v
	}
	// prompt_cache_key needs nothing: the prefix cache finds shared
	// prefixes by their tokens.
	if req.Chat, err = decodeThinking(&j); err != nil {
		return nil, err
	}
	return req, nil
}

// decodeStrictTools reads tools[i].function.strict of a chat request
// (data, which decodes): true makes the function's calls follow its
// parameter schema (structured.strict); false or absent leaves them to the
// model, as OpenAI's default is. The function object itself, strict
// included, is rendered into the prompt as given.
func decodeStrictTools(data []byte, out *structured) *apiError {
	var j struct {
		Tools []struct {
			Function struct {
				Name   string          `json:"name"`
				Strict json.RawMessage `json:"strict"`
			} `json:"function"`
		} `json:"tools"`
	}
	if json.Unmarshal(bytes.TrimPrefix(data, []byte(utf8BOM)), &j) != nil {
		return nil // the request decoded; what does not here has no strict to read
	}
	for i, t := range j.Tools {
		raw := bytes.TrimSpace(t.Function.Strict)
		var strict bool
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		if json.Unmarshal(raw, &strict) != nil {
			return invalidf(fmt.Sprintf("tools[%d].function.strict", i), "invalid_type", "tools[%d].function.strict must be a boolean.", i)
		}
		if strict {
			out.markStrict(t.Function.Name)
		}
	}
	return nil
}

// decodeConversation checks a chat request's messages and tools.
func decodeConversation(in []messageJSON, tools []chat.Tool) ([]chat.Message, []chat.Tool, *apiError) {
	if len(in) == 0 {
		return nil, nil, invalidf("messages", "missing_required_parameter", "messages must hold at least one message.")
	}
	msgs := make([]chat.Message, len(in))
	for i := range in {
		if err := decodeMessage(&in[i], i, &msgs[i]); err != nil {
			return nil, nil, err
		}
	}
	for i := range tools {
		if err := checkTool(&tools[i], i); err != nil {
			return nil, nil, err
		}
	}
	return msgs, tools, nil
}

// decodeThinking reads the ways a request may ask for thinking mode:
// reasoning_effort, thinking {"type": "enabled"|"disabled"}, and
// chat_template_kwargs {"thinking": bool} or {"enable_thinking": bool}.
// They must not contradict each other. Other chat_template_kwargs are kept
// for Jinja templates.
func decodeThinking(j *chatRequestJSON) (ChatOptions, *apiError) {
	var opt ChatOptions
	var set *bool
	vote := func(v bool, param string) *apiError {
		if set != nil && *set != v {
			return invalidf(param, "invalid_value", "%s contradicts another field that turns thinking mode %s.", param, onOff(*set))
		}
		set = &v
		return nil
	}
	if e := j.ReasoningEffort; e != nil {
		switch *e {
		case "none":
			if err := vote(false, "reasoning_effort"); err != nil {
				return opt, err
			}
		case "minimal", "low", "medium", "high":
			opt.ReasoningEffort = "high"
			if err := vote(true, "reasoning_effort"); err != nil {
				return opt, err
			}
		case "xhigh", "max":
			opt.ReasoningEffort = "max"
			if err := vote(true, "reasoning_effort"); err != nil {
				return opt, err
			}
		default:
			return opt, invalidf("reasoning_effort", "invalid_value", "reasoning_effort must be one of none, minimal, low, medium, high, xhigh or max, not %q.", *e)
		}
	}
	if t := j.Thinking; t != nil {
		switch t.Type {
		case "enabled":
			if err := vote(true, "thinking.type"); err != nil {
				return opt, err
			}
		case "disabled":
			if err := vote(false, "thinking.type"); err != nil {
				return opt, err
			}
		default:
			return opt, invalidf("thinking.type", "invalid_value", "thinking.type must be \"enabled\" or \"disabled\", not %q.", t.Type)
		}
	}
	for k, raw := range j.ChatTemplateKwargs {
		param := "chat_template_kwargs." + k
		if k == "thinking" || k == "enable_thinking" {
			var b bool
			if json.Unmarshal(raw, &b) != nil {
				return opt, invalidf(param, "invalid_type", "%s must be a boolean.", param)
			}
			if err := vote(b, param); err != nil {
				return opt, err
			}
			continue
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return opt, invalidf(param, "invalid_json", "%s: %v.", param, err)
		}
		if opt.TemplateKwargs == nil {
			opt.TemplateKwargs = map[string]any{}
		}
		opt.TemplateKwargs[k] = v
	}
	opt.Thinking = set != nil && *set
	if !opt.Thinking {
		opt.ReasoningEffort = ""
	}
	return opt, nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// decodeMessage converts message i to chat.Message.
func decodeMessage(m *messageJSON, i int, out *chat.Message) *apiError {
	param := fmt.Sprintf("messages[%d]", i)
	switch m.Role {
	case chat.RoleSystem, chat.RoleDeveloper, chat.RoleUser, chat.RoleAssistant, chat.RoleTool:
	case "":
		return invalidf(param+".role", "missing_required_parameter", "%s.role is required.", param)
	default:
		return invalidf(param+".role", "invalid_value", "%s.role must be system, developer, user, assistant or tool, not %q.", param, m.Role)
	}
	content, err := decodeContent(m.Content, param+".content")
	if err != nil {
		return err
	}
	*out = chat.Message{Role: m.Role, Content: content, ToolCallID: m.ToolCallID, Name: m.Name}
	if m.Refusal != nil && *m.Refusal != "" {
		return unsupported(param+".refusal", "%s.refusal: refusals cannot be sent back; give the text as content.", param)
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
	}{{"audio", m.Audio}, {"function_call", m.FunctionCall}} {
		if v := bytes.TrimSpace(f.raw); len(v) > 0 && string(v) != "null" {
			return unsupported(param+"."+f.name, "%s.%s is not supported.", param, f.name)
		}
	}
	// annotations (url citations) describe a received message; they have
	// no place in a prompt.
	if m.ReasoningContent != nil {
		if m.Role != chat.RoleAssistant {
			return invalidf(param+".reasoning_content", "invalid_value", "only assistant messages may have reasoning_content.")
		}
		out.ReasoningContent = *m.ReasoningContent
	}
	if len(m.ToolCalls) > 0 {
		if m.Role != chat.RoleAssistant {
			return invalidf(param+".tool_calls", "invalid_value", "only assistant messages may have tool_calls.")
		}
		for k, c := range m.ToolCalls {
			cp := fmt.Sprintf("%s.tool_calls[%d]", param, k)
			if c.Name == "" {
				return invalidf(cp+".function.name", "missing_required_parameter", "%s.function.name is required.", cp)
			}
			if a := strings.TrimSpace(c.Arguments); a != "" && !isJSONObject(a) {
				return invalidf(cp+".function.arguments", "invalid_value", "%s.function.arguments must be a JSON object.", cp)
			}
		}
		out.ToolCalls = m.ToolCalls
	}
	return nil
}

// decodeContent reads message content: null, a string, or an array of text
// parts, which are joined with newlines.
func decodeContent(raw json.RawMessage, param string) (string, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", invalidf(param, "invalid_type", "%s must be a string, null or an array of text parts.", param)
	}
	texts := make([]string, len(parts))
	for i, p := range parts {
		if p.Type != "text" {
			return "", unsupported(fmt.Sprintf("%s[%d].type", param, i), "content parts of type %q are not supported; only \"text\".", p.Type)
		}
		if p.Text == nil {
			return "", invalidf(fmt.Sprintf("%s[%d].text", param, i), "missing_required_parameter", "a text part needs text.")
		}
		texts[i] = *p.Text
	}
	return strings.Join(texts, "\n"), nil
}

// checkTool validates tool i.
func checkTool(t *chat.Tool, i int) *apiError {
	param := fmt.Sprintf("tools[%d]", i)
	if t.Type != "function" {
		return invalidf(param+".type", "invalid_value", "%s.type must be \"function\", not %q.", param, t.Type)
	}
	name := t.Function.Name
	if name == "" || len(name) > maxToolNameSize || strings.IndexFunc(name, func(r rune) bool {
		return !(r == '_' || r == '-' || r == '.' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9'))
	}) >= 0 {
		return invalidf(param+".function.name", "invalid_value", "%s.function.name must be 1 to %d letters, digits, '_', '-' or '.', not %q.", param, maxToolNameSize, name)
	}
	if p := bytes.TrimSpace(t.Function.Parameters); len(p) > 0 && string(p) != "null" && !isJSONObject(string(p)) {
		return invalidf(param+".function.parameters", "invalid_value", "%s.function.parameters must be a JSON object.", param)
	}
	return nil
}

// isJSONObject reports whether s is one valid JSON object.
func isJSONObject(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasPrefix(s, "{") && json.Valid([]byte(s))
}

// decodeCompletionRequest decodes and validates a completions request body;
// token prompts must hold ids below vocab. It does not check the model name
// or the context length.
func decodeCompletionRequest(data []byte, vocab int) (*completionRequest, *apiError) {
	var j completionRequestJSON
	if err := decodeJSON(data, &j); err != nil {
		return nil, err
	}
	req := &completionRequest{}
	if err := decodeParams(&j.paramsJSON, &req.genParams, vocab); err != nil {
		return nil, err
	}
	var err *apiError
	if j.MaxTokens == nil {
		req.MaxTokens = 16 // OpenAI's default for this endpoint
	} else if req.MaxTokens, err = maxTokensParam("max_tokens", j.MaxTokens); err != nil {
		return nil, err
	}
	req.Logprobs = -1
	if v := j.Logprobs; v != nil {
		if *v < 0 || *v > maxTopLogprobs {
			return nil, invalidf("logprobs", "invalid_value", "logprobs must be between 0 and %d, not %d.", maxTopLogprobs, *v)
		}
		req.Logprobs = *v
	}
	req.Echo = j.Echo != nil && *j.Echo
	if req.Echo && req.Logprobs >= 0 {
		return nil, unsupported("echo", "echo together with logprobs is not supported (it needs the prompt's log-probabilities).")
	}
	if j.Suffix != nil && *j.Suffix != "" {
		return nil, unsupported("suffix", "suffix is not supported.")
	}
	if j.BestOf != nil && *j.BestOf != req.N {
		return nil, unsupported("best_of", "best_of other than n is not supported.")
	}
	if req.Prompts, err = decodePrompts(j.Prompt, vocab); err != nil {
		return nil, err
	}
	return req, nil
}

// decodePrompts reads prompt: a string, an array of strings, an array of
// token ids, or an array of arrays of token ids.
func decodePrompts(raw json.RawMessage, vocab int) ([]prompt, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, invalidf("prompt", "missing_required_parameter", "prompt is required.")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []prompt{{Text: s}}, nil
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return nil, invalidf("prompt", "invalid_type", "prompt must be a string, an array of strings, an array of token ids or an array of arrays of token ids.")
	}
	if len(list) == 0 {
		return nil, invalidf("prompt", "invalid_value", "prompt must not be an empty array.")
	}
	var strs []string
	if json.Unmarshal(raw, &strs) == nil {
		if len(strs) > maxPrompts {
			return nil, invalidf("prompt", "invalid_value", "prompt has %d prompts; at most %d are allowed.", len(strs), maxPrompts)
		}
		out := make([]prompt, len(strs))
		for i, s := range strs {
			out[i] = prompt{Text: s}
		}
		return out, nil
	}
	var ids []int64
	if json.Unmarshal(raw, &ids) == nil {
		toks, err := tokenIDs(ids, vocab, "prompt")
		if err != nil {
			return nil, err
		}
		return []prompt{{Tokens: toks, IsTokens: true}}, nil
	}
	var lists [][]int64
	if json.Unmarshal(raw, &lists) != nil {
		return nil, invalidf("prompt", "invalid_type", "prompt must be a string, an array of strings, an array of token ids or an array of arrays of token ids.")
	}
	if len(lists) > maxPrompts {
		return nil, invalidf("prompt", "invalid_value", "prompt has %d prompts; at most %d are allowed.", len(lists), maxPrompts)
	}
	out := make([]prompt, len(lists))
	for i, l := range lists {
		toks, err := tokenIDs(l, vocab, fmt.Sprintf("prompt[%d]", i))
		if err != nil {
			return nil, err
		}
		out[i] = prompt{Tokens: toks, IsTokens: true}
	}
	return out, nil
}

// tokenIDs checks token ids against the vocabulary.
func tokenIDs(ids []int64, vocab int, param string) ([]int32, *apiError) {
	if len(ids) == 0 {
		return nil, invalidf(param, "invalid_value", "%s must not be an empty array of token ids.", param)
	}
	out := make([]int32, len(ids))
	for i, id := range ids {
		if id < 0 || id >= int64(vocab) || id > math.MaxInt32 {
			return nil, invalidf(fmt.Sprintf("%s[%d]", param, i), "invalid_value", "token id %d is outside the vocabulary of %d.", id, vocab)
		}
		out[i] = int32(id)
	}
	return out, nil
}
