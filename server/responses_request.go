package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/strata-inference/strata/tokenizer/chat"
)

// responsesRequest is a validated POST /v1/responses request of OpenAI's
// Responses API.
type responsesRequest struct {
	genParams
	Instructions *string
	// Input is the request's own input as chat messages (before any stored
	// conversation previous_response_id continues).
	Input []chat.Message
	Tools []chat.Tool
	// ToolsJSON are the tools as given, echoed in the response.
	ToolsJSON []json.RawMessage
	// ToolChoice is "auto", "none", "required" or "function"; ToolChoiceJSON
	// is tool_choice as the response echoes it.
	ToolChoice     string
	ToolChoiceJSON json.RawMessage
	Parallel       bool // parallel_tool_calls (default true)
	MaxToolCalls   int  // 0: no limit
	// Structured is what the reply must be: text.format, a forced
	// tool_choice and strict tools (strict is the default), constraint.go.
	Structured structured
	// FormatJSON is text.format as the response echoes it.
	FormatJSON json.RawMessage
	Chat       ChatOptions
	// Effort is reasoning.effort as given ("" when absent); Summary is
	// reasoning.summary ("" when absent or null).
	Effort, Summary string
	Store           bool // default true
	PreviousID      string
	// Encrypted: include asks for reasoning.encrypted_content.
	Encrypted bool
	Metadata  map[string]string
	MaxOutput *int // max_output_tokens as given
}

type responsesRequestJSON struct {
	Model              *string            `json:"model"`
	Input              json.RawMessage    `json:"input"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int               `json:"max_output_tokens"`
	Temperature        *float64           `json:"temperature"`
	TopP               *float64           `json:"top_p"`
	Stream             *bool              `json:"stream"`
	Tools              []json.RawMessage  `json:"tools"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	ParallelToolCalls  *bool              `json:"parallel_tool_calls"`
	MaxToolCalls       *int               `json:"max_tool_calls"`
	Reasoning          *reasoningJSON     `json:"reasoning"`
	Store              *bool              `json:"store"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Include            []string           `json:"include"`
	Text               *responseTextJSON  `json:"text"`
	Truncation         *string            `json:"truncation"`
	Metadata           map[string]string  `json:"metadata"`
	User               *string            `json:"user"`
	SafetyIdentifier   *string            `json:"safety_identifier"`
	PromptCacheKey     *string            `json:"prompt_cache_key"`
	ServiceTier        *string            `json:"service_tier"`
	Background         *bool              `json:"background"`
	TopLogprobs        *int               `json:"top_logprobs"`
	StreamOptions      *streamOptionsJSON `json:"stream_options"`
	// strata's extensions, as on the other endpoints.
	Seed      *int64 `json:"seed"`
	TopK      *int   `json:"top_k"`
	IgnoreEOS *bool  `json:"ignore_eos"`
}

type reasoningJSON struct {
	Effort          *string `json:"effort"`
	Summary         *string `json:"summary"`
	GenerateSummary *string `json:"generate_summary"`
}

type responseTextJSON struct {
	Format    json.RawMessage `json:"format"`
	Verbosity *string         `json:"verbosity"`
}

// Input items, by type.
type (
	inputMessageJSON struct {
		Type    string          `json:"type"`
		ID      string          `json:"id"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		Status  string          `json:"status"`
	}
	inputPartJSON struct {
		Type        string          `json:"type"`
		Text        *string         `json:"text"`
		Refusal     *string         `json:"refusal"`
		Annotations json.RawMessage `json:"annotations"`
		Logprobs    json.RawMessage `json:"logprobs"`
	}
	functionCallJSON struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		Status    string `json:"status"`
	}
	functionOutputJSON struct {
		Type   string          `json:"type"`
		ID     string          `json:"id"`
		CallID string          `json:"call_id"`
		Name   string          `json:"name"` // the call_id names the call already
		Output json.RawMessage `json:"output"`
		Status string          `json:"status"`
	}
	reasoningItemJSON struct {
		Type             string          `json:"type"`
		ID               string          `json:"id"`
		Summary          []inputPartJSON `json:"summary"`
		Content          []inputPartJSON `json:"content"`
		EncryptedContent *string         `json:"encrypted_content"`
		Status           string          `json:"status"`
	}
	functionToolJSON struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	}
)

// encryptedPrefix starts the encrypted_content strata gives reasoning
// items: the base64 of the reasoning, so that a client that stores nothing
// (store false) can send the reasoning back. It is an encoding, not
// encryption: the client sees what the model reasoned.
const encryptedPrefix = "strata1."

// decodeResponsesRequest decodes and validates a Responses API request;
// token ids must be below vocab. It does not check the model name, the
// context length or previous_response_id.
func decodeResponsesRequest(data []byte, vocab int) (*responsesRequest, *apiError) {
	var j responsesRequestJSON
	if err := decodeJSON(data, &j); err != nil {
		return nil, err
	}
	req := &responsesRequest{Parallel: true, Store: true, ToolChoice: "auto"}
	if j.Model == nil || *j.Model == "" {
		return nil, invalidf("model", "missing_required_parameter", "model is required.")
	}
	req.Model = *j.Model
	req.N, req.Logprobs, req.SkipSpecial = 1, -1, true
	req.Stream = j.Stream != nil && *j.Stream
	if j.StreamOptions != nil {
		if !req.Stream {
			return nil, invalidf("stream_options", "invalid_value", "stream_options is only allowed when stream is true.")
		}
		if j.StreamOptions.IncludeUsage != nil {
			return nil, unsupported("stream_options.include_usage", "the Responses API always reports usage in its last event; stream_options.include_usage is a chat completions field.")
		}
		if v := j.StreamOptions.IncludeObfuscation; v != nil && *v {
			return nil, unsupported("stream_options.include_obfuscation", "stream_options.include_obfuscation is not supported: this server does not pad stream events.")
		}
	}
	if j.MaxOutputTokens != nil {
		var err *apiError
		if req.MaxTokens, err = maxTokensParam("max_output_tokens", j.MaxOutputTokens); err != nil {
			return nil, err
		}
		req.MaxOutput = j.MaxOutputTokens
	}
	s := &req.Sampling
	s.Temperature = 1
	if v := j.Temperature; v != nil {
		if !(*v >= 0 && *v <= 2) {
			return nil, invalidf("temperature", "invalid_value", "temperature must be between 0 and 2, not %g.", *v)
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
		if *v < -1 {
			return nil, invalidf("top_k", "invalid_value", "top_k must be -1 or 0 (all tokens) or positive, not %d.", *v)
		}
		s.TopK = max(*v, 0)
	}
	if j.Seed != nil {
		req.HasSeed, req.Seed = true, *j.Seed
	}
	req.IgnoreEOS = j.IgnoreEOS != nil && *j.IgnoreEOS
	if v := j.TopLogprobs; v != nil && *v != 0 {
		return nil, unsupported("top_logprobs", "top_logprobs is not supported on /v1/responses; use /v1/chat/completions for log-probabilities.")
	}
	if v := j.Background; v != nil && *v {
		return nil, unsupported("background", "background responses are not supported.")
	}
	if v := j.Truncation; v != nil && *v != "disabled" {
		return nil, unsupported("truncation", "truncation must be \"disabled\": this server does not drop input to fit the context, it refuses what does not fit.")
	}
	if v := j.ServiceTier; v != nil && *v != "auto" && *v != "default" {
		return nil, unsupported("service_tier", "service_tier must be \"auto\" or \"default\" (this server has one tier), not %q.", *v)
	}
	if t := j.Text; t != nil {
		if v := t.Verbosity; v != nil && *v != "medium" {
			return nil, unsupported("text.verbosity", "text.verbosity %q is not supported; the model has one verbosity (\"medium\").", *v)
		}
		if err := decodeTextFormat(t.Format, &req.Structured); err != nil {
			return nil, err
		}
		if f := bytes.TrimSpace(t.Format); len(f) > 0 && string(f) != "null" {
			var c bytes.Buffer
			json.Compact(&c, f)
			req.FormatJSON = c.Bytes()
		}
	}
	for i, inc := range j.Include {
		switch inc {
		case "reasoning.encrypted_content":
			req.Encrypted = true
		default:
			return nil, unsupported(fmt.Sprintf("include[%d]", i), "include %q is not supported; only \"reasoning.encrypted_content\".", inc)
		}
	}
	req.Instructions = j.Instructions
	if v := j.Store; v != nil {
		req.Store = *v
	}
	if v := j.PreviousResponseID; v != nil {
		if *v == "" {
			return nil, invalidf("previous_response_id", "invalid_value", "previous_response_id must not be empty.")
		}
		req.PreviousID = *v
	}
	if len(j.Metadata) > 16 {
		return nil, invalidf("metadata", "invalid_value", "metadata has %d keys; at most 16 are allowed.", len(j.Metadata))
	}
	for k, v := range j.Metadata {
		if len(k) > 64 || len(v) > 512 {
			return nil, invalidf("metadata", "invalid_value", "metadata keys have at most 64 characters and values 512.")
		}
	}
	req.Metadata = j.Metadata
	if j.User != nil {
		req.User = *j.User
	} else if j.SafetyIdentifier != nil {
		req.User = *j.SafetyIdentifier
	}
	if err := decodeResponsesReasoning(j.Reasoning, req); err != nil {
		return nil, err
	}
	if err := decodeResponsesTools(&j, req); err != nil {
		return nil, err
	}
	in, err := decodeResponsesInput(j.Input)
	if err != nil {
		return nil, err
	}
	if len(in) == 0 && req.PreviousID == "" {
		return nil, invalidf("input", "missing_required_parameter", "input is required.")
	}
	req.Input = in
	if err := req.Sampling.Validate(); err != nil {
		return nil, invalidf("", "invalid_value", "%v.", err)
	}
	return req, nil
}

// decodeResponsesReasoning reads reasoning {effort, summary}: effort none
// (or no reasoning field) is chat mode, any other effort thinking mode
// (xhigh with DeepSeek-V4's maximum effort).
func decodeResponsesReasoning(r *reasoningJSON, req *responsesRequest) *apiError {
	if r == nil {
		return nil
	}
	if r.Effort != nil {
		req.Effort = *r.Effort
		switch *r.Effort {
		case "none":
		case "minimal", "low", "medium", "high":
			req.Chat.Thinking, req.Chat.ReasoningEffort = true, "high"
		case "xhigh", "max":
			req.Chat.Thinking, req.Chat.ReasoningEffort = true, "max"
		default:
			return invalidf("reasoning.effort", "invalid_value", "reasoning.effort must be one of none, minimal, low, medium, high or xhigh, not %q.", *r.Effort)
		}
	}
	summary := r.Summary
	if summary == nil {
		summary = r.GenerateSummary
	}
	if summary != nil {
		switch *summary {
		case "auto", "concise", "detailed":
			// strata has no summarizer: the summary is the reasoning itself.
			req.Summary = *summary
		default:
			return invalidf("reasoning.summary", "invalid_value", "reasoning.summary must be auto, concise or detailed, not %q.", *summary)
		}
	}
	return nil
}

// decodeResponsesTools reads tools (function tools, strict unless strict
// is false: their calls follow their parameter schema), tool_choice,
// parallel_tool_calls and max_tool_calls.
func decodeResponsesTools(j *responsesRequestJSON, req *responsesRequest) *apiError {
	for i, raw := range j.Tools {
		param := fmt.Sprintf("tools[%d]", i)
		typ, err := blockType(raw, param)
		if err != nil {
			return err
		}
		if typ != "function" {
			return unsupported(param+".type", "%s is a tool of type %q; this server runs only function tools.", param, typ)
		}
		var t functionToolJSON
		if err := strictUnmarshal(raw, &t, param); err != nil {
			return err
		}
		ct := chat.Tool{Type: "function", Function: chat.ToolFunction{Name: t.Name, Description: t.Description, Parameters: t.Parameters}}
		if err := checkTool(&ct, i); err != nil {
			err.Param = strings.Replace(err.Param, ".function.", ".", 1)
			return err
		}
		if t.Strict == nil || *t.Strict { // the Responses API's default: strict
			req.Structured.markStrict(t.Name)
		}
		req.Tools = append(req.Tools, ct)
		req.ToolsJSON = append(req.ToolsJSON, raw)
	}
	var err *apiError
	if req.Tools, req.ToolChoiceJSON, err = decodeResponsesToolChoice(j.ToolChoice, req.Tools, &req.Structured); err != nil {
		return err
	}
	req.ToolChoice = "function" // unless the echo is a mode's name
	json.Unmarshal(req.ToolChoiceJSON, &req.ToolChoice)
	if v := j.ParallelToolCalls; v != nil {
		req.Parallel = *v
	}
	if v := j.MaxToolCalls; v != nil {
		if *v < 1 {
			return invalidf("max_tool_calls", "invalid_value", "max_tool_calls must be at least 1, not %d.", *v)
		}
		req.MaxToolCalls = *v
	}
	req.Structured.parallel, req.Structured.maxCalls = req.Parallel, req.MaxToolCalls
	return nil
}

// decodeResponsesInput reads input: a string (one user message) or a list
// of items, turned into chat messages. An assistant turn is the run of
// reasoning, assistant message and function_call items between other
// items; function_call_output items become tool messages.
func decodeResponsesInput(raw json.RawMessage) ([]chat.Message, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return []chat.Message{{Role: chat.RoleUser, Content: text}}, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil, invalidf("input", "invalid_type", "input must be a string or an array of input items.")
	}
	var out []chat.Message
	var turn *chat.Message // the assistant turn being read
	flush := func() {
		if turn != nil {
			out = append(out, *turn)
			turn = nil
		}
	}
	assistant := func() *chat.Message {
		if turn == nil {
			turn = &chat.Message{Role: chat.RoleAssistant}
		}
		return turn
	}
	for i, item := range items {
		param := fmt.Sprintf("input[%d]", i)
		var head struct {
			Type string `json:"type"`
			Role string `json:"role"`
		}
		if json.Unmarshal(item, &head) != nil {
			return nil, invalidf(param, "invalid_type", "%s must be an input item object.", param)
		}
		if head.Type == "" && head.Role != "" {
			head.Type = "message"
		}
		switch head.Type {
		case "message":
			var m inputMessageJSON
			if err := strictUnmarshal(item, &m, param); err != nil {
				return nil, err
			}
			content, err := inputContent(m.Content, param+".content")
			if err != nil {
				return nil, err
			}
			switch m.Role {
			case "assistant":
				t := assistant()
				if len(t.ToolCalls) > 0 { // text after calls starts a new turn
					flush()
					t = assistant()
				}
				if t.Content != "" {
					t.Content += "\n"
				}
				t.Content += content
			case "user", "system", "developer":
				flush()
				out = append(out, chat.Message{Role: m.Role, Content: content})
			case "":
				return nil, invalidf(param+".role", "missing_required_parameter", "%s.role is required.", param)
			default:
				return nil, invalidf(param+".role", "invalid_value", "%s.role must be user, assistant, system or developer, not %q.", param, m.Role)
			}
		case "function_call":
			var c functionCallJSON
			if err := strictUnmarshal(item, &c, param); err != nil {
				return nil, err
			}
			if c.CallID == "" || c.Name == "" {
				return nil, invalidf(param, "missing_required_parameter", "%s needs call_id and name.", param)
			}
			if a := strings.TrimSpace(c.Arguments); a != "" && !isJSONObject(a) {
				return nil, invalidf(param+".arguments", "invalid_value", "%s.arguments must be a JSON object.", param)
			}
			t := assistant()
			t.ToolCalls = append(t.ToolCalls, chat.ToolCall{ID: c.CallID, Name: c.Name, Arguments: c.Arguments})
		case "function_call_output":
			var o functionOutputJSON
			if err := strictUnmarshal(item, &o, param); err != nil {
				return nil, err
			}
			if o.CallID == "" {
				return nil, invalidf(param+".call_id", "missing_required_parameter", "%s.call_id is required.", param)
			}
			output, err := inputContent(o.Output, param+".output")
			if err != nil {
				return nil, err
			}
			flush()
			out = append(out, chat.Message{Role: chat.RoleTool, ToolCallID: o.CallID, Content: output})
		case "reasoning":
			var r reasoningItemJSON
			if err := strictUnmarshal(item, &r, param); err != nil {
				return nil, err
			}
			text, err := reasoningText(&r, param)
			if err != nil {
				return nil, err
			}
			if turn != nil && (turn.Content != "" || len(turn.ToolCalls) > 0) {
				flush() // reasoning after an answer begins the next turn
			}
			t := assistant()
			if t.ReasoningContent != "" {
				t.ReasoningContent += "\n"
			}
			t.ReasoningContent += text
		case "":
			return nil, invalidf(param+".type", "missing_required_parameter", "%s.type is required.", param)
		default:
			return nil, unsupported(param+".type", "%s: input items of type %q are not supported; only message, function_call, function_call_output and reasoning.", param, head.Type)
		}
	}
	flush()
	return out, nil
}

// inputContent reads a message's content, or a function call's output: a
// string or a list of text parts (input_text, output_text), joined by
// newlines.
func inputContent(raw json.RawMessage, param string) (string, *apiError) {
	raw = bytes.TrimSpace(raw)
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &parts) != nil {
		return "", invalidf(param, "invalid_type", "%s must be a string or an array of content parts.", param)
	}
	texts := make([]string, len(parts))
	for i, raw := range parts {
		pp := fmt.Sprintf("%s[%d]", param, i)
		typ, err := blockType(raw, pp)
		if err != nil {
			return "", err
		}
		if typ != "input_text" && typ != "output_text" && typ != "refusal" {
			return "", unsupported(pp+".type", "%s: content parts of type %q are not supported; only text.", pp, typ)
		}
		var p inputPartJSON
		if err := strictUnmarshal(raw, &p, pp); err != nil {
			return "", err
		}
		switch p.Type {
		case "input_text", "output_text":
			if p.Text == nil {
				return "", invalidf(pp+".text", "missing_required_parameter", "%s.text is required.", pp)
			}
			texts[i] = *p.Text
		case "refusal":
			if p.Refusal == nil {
				return "", invalidf(pp+".refusal", "missing_required_parameter", "%s.refusal is required.", pp)
			}
			texts[i] = *p.Refusal
		default:
			return "", unsupported(pp+".type", "%s: content parts of type %q are not supported; only text.", pp, p.Type)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// reasoningText is what a reasoning item says the model reasoned: its
// reasoning_text content, else its encrypted_content (if strata made it),
// else its summary.
func reasoningText(r *reasoningItemJSON, param string) (string, *apiError) {
	var texts []string
	for i, p := range r.Content {
		if p.Type != "reasoning_text" || p.Text == nil {
			return "", invalidf(fmt.Sprintf("%s.content[%d]", param, i), "invalid_value", "reasoning content parts must be reasoning_text with text.")
		}
		texts = append(texts, *p.Text)
	}
	if len(texts) > 0 {
		return strings.Join(texts, "\n"), nil
	}
	if e := r.EncryptedContent; e != nil && *e != "" {
		enc, ok := strings.CutPrefix(*e, encryptedPrefix)
		b, err := base64.StdEncoding.DecodeString(enc)
		if !ok || err != nil {
			return "", invalidf(param+".encrypted_content", "invalid_value", "%s.encrypted_content was not made by this server.", param)
		}
		return string(b), nil
	}
	for i, p := range r.Summary {
		if p.Type != "summary_text" || p.Text == nil {
			return "", invalidf(fmt.Sprintf("%s.summary[%d]", param, i), "invalid_value", "reasoning summary parts must be summary_text with text.")
		}
		texts = append(texts, *p.Text)
	}
	return strings.Join(texts, "\n"), nil
}
