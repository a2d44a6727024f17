package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/strata-inference/strata/engine"
)

// Anthropic's Messages API (POST /v1/messages, POST
// /v1/messages/count_tokens) over the same engine and chat format as the
// OpenAI endpoints: Claude Code and the other Anthropic clients speak it.

// isAnthropicPath reports whether path is one of the Messages API's, whose
// errors take Anthropic's shape.
func isAnthropicPath(path string) bool { return strings.HasPrefix(path, "/v1/messages") }

// anthropicErrorType is Anthropic's error type for an HTTP status.
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusMethodNotAllowed:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	}
	return "api_error"
}

type anthropicErrorJSON struct {
	Type  string `json:"type"` // "error"
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func anthropicErrorBody(e *apiError) anthropicErrorJSON {
	var b anthropicErrorJSON
	b.Type = "error"
	b.Error.Type = anthropicErrorType(e.Status)
	b.Error.Message = e.Message
	if e.Param != "" && !strings.Contains(e.Message, e.Param) {
		b.Error.Message = e.Param + ": " + e.Message
	}
	return b
}

// writeAnthropicError sends e in Anthropic's error shape
// {"type":"error","error":{"type","message"}}.
func writeAnthropicError(w http.ResponseWriter, e *apiError) {
	if e.Status == http.StatusServiceUnavailable || e.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, anthropicErrorBody(e))
}

// Response shapes of the Messages API.
type (
	anthropicMessageOut struct {
		ID           string              `json:"id"`
		Type         string              `json:"type"` // "message"
		Role         string              `json:"role"`
		Model        string              `json:"model"`
		Content      []anthropicBlockOut `json:"content"`
		StopReason   *string             `json:"stop_reason"`
		StopSequence *string             `json:"stop_sequence"`
		Usage        anthropicUsageJSON  `json:"usage"`
		Container    *struct{}           `json:"container"` // always null
		StopDetails  *struct{}           `json:"stop_details"`
	}

	anthropicBlockOut struct {
		Type      string          `json:"type"`
		Text      *string         `json:"text,omitempty"`
		Thinking  *string         `json:"thinking,omitempty"`
		Signature *string         `json:"signature,omitempty"`
		ID        string          `json:"id,omitempty"`
		Name      string          `json:"name,omitempty"`
		Input     json.RawMessage `json:"input,omitempty"`
	}

	// anthropicUsageJSON counts as Anthropic does: input_tokens are the
	// prompt tokens computed, cache_read_input_tokens those the prefix
	// cache supplied (their sum is the prompt).
	anthropicUsageJSON struct {
		InputTokens              int `json:"input_tokens"`
		OutputTokens             int `json:"output_tokens"`
		CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	}

	anthropicDeltaOut struct {
		Type        string  `json:"type"`
		Text        *string `json:"text,omitempty"`
		Thinking    *string `json:"thinking,omitempty"`
		Signature   *string `json:"signature,omitempty"`
		PartialJSON *string `json:"partial_json,omitempty"`
	}

	anthropicEvent struct {
		Type         string               `json:"type"`
		Message      *anthropicMessageOut `json:"message,omitempty"`
		Index        *int                 `json:"index,omitempty"`
		ContentBlock *anthropicBlockOut   `json:"content_block,omitempty"`
		Delta        any                  `json:"delta,omitempty"`
		Usage        *anthropicUsageJSON  `json:"usage,omitempty"`
	}

	anthropicStopDelta struct {
		StopReason   *string `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	}
)

// anthropicPing is the Messages API's keep-alive event.
const anthropicPing = "event: ping\ndata: {\"type\": \"ping\"}\n\n"

func strPtr(s string) *string { return &s }

func (s *Server) handleCountTokens(w http.ResponseWriter, r *http.Request) {
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeAnthropicError(w, aerr)
		return
	}
	req, aerr := decodeMessagesRequest(body, true)
	if aerr != nil {
		writeAnthropicError(w, aerr)
		return
	}
	if req.Model != s.opt.ModelName {
		writeAnthropicError(w, modelNotFound(req.Model, s.opt.ModelName))
		return
	}
	text, err := s.format.Render(req.Messages, req.Tools, req.Chat)
	if err != nil {
		writeAnthropicError(w, invalidf("messages", "invalid_value", "The conversation cannot be rendered as a %s prompt: %v.", s.format.Name(), err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": len(s.tok.Encode(text, true))})
}

func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	info := infoOf(r.Context())
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeAnthropicError(w, aerr)
		return
	}
	req, aerr := decodeMessagesRequest(body, false)
	if aerr != nil {
		writeAnthropicError(w, aerr)
		return
	}
	if req.Model != s.opt.ModelName {
		writeAnthropicError(w, modelNotFound(req.Model, s.opt.ModelName))
		return
	}
	text, err := s.format.Render(req.Messages, req.Tools, req.Chat)
	if err != nil {
		writeAnthropicError(w, invalidf("messages", "invalid_value", "The conversation cannot be rendered as a %s prompt: %v.", s.format.Name(), err))
		return
	}
	promptToks := s.tok.Encode(text, true)
	maxTokens, aerr := s.budget(len(promptToks), req.MaxTokens, 0, "messages")
	if aerr != nil {
		writeAnthropicError(w, aerr)
		return
	}
	gctx, stop := s.genContext(r)
	defer stop()
	ctx, cancel := context.WithCancel(gctx)
	defer cancel()
	choices, aerr := s.submit(ctx, []engine.Request{engineRequest(&req.genParams, promptToks, maxTokens, 0)}, 1)
	if aerr != nil {
		writeAnthropicError(w, aerr)
		return
	}
	s.metrics.promptTokens.Add(float64(len(promptToks)))
	info.attrs = append(info.attrs, slog.String("model", req.Model), slog.Bool("stream", req.Stream),
		slog.Bool("thinking", req.Chat.Thinking), slog.Int("prompt_tokens", len(promptToks)))
	if req.User != "" {
		info.attrs = append(info.attrs, slog.String("user", req.User))
	}
	parse := req.Chat
	if req.Prefilled {
		parse.Thinking = false // the reply continues the prefilled text, after any reasoning
	}
	g := &messagesGen{s: s, req: req, id: newID("msg_"), prompt: len(promptToks), opt: s.chatOptionsFor(&req.genParams, start)}
	g.reply = newReply(s.format, parse, req.Tools)
	g.reply.single = req.SingleToolCall
	if req.Stream {
		g.stream(ctx, cancel, w, info, choices)
	} else {
		g.complete(ctx, cancel, w, info, choices)
	}
}

// messagesGen is one Messages API request being generated.
type messagesGen struct {
	s      *Server
	req    *messagesRequest
	id     string
	prompt int
	opt    genOptions
	reply  *reply
}

// stopReason is Anthropic's name for why the reply ended, and the stop
// sequence that ended it.
func (g *messagesGen) stopReason() (*string, *string) {
	switch st := g.reply; {
	case st.finish == "tool_calls":
		return strPtr("tool_use"), nil
	case st.finish == "length":
		return strPtr("max_tokens"), nil
	case st.stop != "":
		return strPtr("stop_sequence"), strPtr(st.stop)
	}
	return strPtr("end_turn"), nil
}

func (g *messagesGen) usage() anthropicUsageJSON {
	return anthropicUsageJSON{InputTokens: g.prompt - g.reply.cached, OutputTokens: g.reply.tokens, CacheReadInputTokens: g.reply.cached}
}

func (g *messagesGen) message() *anthropicMessageOut {
	return &anthropicMessageOut{ID: g.id, Type: "message", Role: "assistant", Model: g.req.Model, Content: []anthropicBlockOut{}}
}

// toolUseIDs are fresh ids for the reply's tool calls.
func (g *messagesGen) toolUseIDs() []string {
	ids := make([]string, len(g.reply.calls))
	for i := range ids {
		ids[i] = newID("toolu_")
	}
	return ids
}

// thinkingText is what a thinking block shows of the reasoning.
func (g *messagesGen) thinkingText(r string) string {
	if g.req.OmitThinking {
		return ""
	}
	return r
}

func (g *messagesGen) complete(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, info *requestInfo, choices []*choice) {
	_, err := g.s.runChoices(ctx, cancel, choices, g.opt, func(c *choice, d delta) error {
		g.reply.feed(d, g.s.log)
		return nil
	})
	info.attrs = append(info.attrs, slog.Int("completion_tokens", g.reply.tokens))
	if err != nil {
		if aerr := failure(ctx, info, err); aerr != nil {
			writeAnthropicError(w, aerr)
		}
		return
	}
	m := g.message()
	if r := g.reply.reasoning.String(); r != "" {
		m.Content = append(m.Content, anthropicBlockOut{Type: "thinking", Thinking: strPtr(g.thinkingText(r)), Signature: strPtr(thinkingSignature(r))})
	}
	if t := g.reply.content.String(); t != "" || len(g.reply.calls) == 0 {
		m.Content = append(m.Content, anthropicBlockOut{Type: "text", Text: &t})
	}
	for i, id := range g.toolUseIDs() {
		c := g.reply.calls[i]
		m.Content = append(m.Content, anthropicBlockOut{Type: "tool_use", ID: id, Name: c.Name, Input: json.RawMessage(toolInput(c.Arguments))})
	}
	m.StopReason, m.StopSequence = g.stopReason()
	m.Usage = g.usage()
	info.attrs = append(info.attrs, slog.String("finish", *m.StopReason))
	writeJSON(w, http.StatusOK, m)
}

// toolInput is a call's arguments as a JSON object ({} when empty).
func toolInput(args string) string {
	if strings.TrimSpace(args) == "" {
		return "{}"
	}
	return args
}

// blockStream follows the content blocks of a streamed message: at most
// one open at a time, indexed in order.
type blockStream struct {
	sse       *sseWriter
	next      int
	open      string // "", "thinking" or "text"
	reasoning strings.Builder
	omit      bool // thinking text omitted
}

func (b *blockStream) start(block anthropicBlockOut) error {
	i := b.next
	b.next++
	b.open = block.Type
	return b.sse.sendEvent("content_block_start", anthropicEvent{Type: "content_block_start", Index: &i, ContentBlock: &block})
}

func (b *blockStream) delta(d anthropicDeltaOut) error {
	i := b.next - 1
	return b.sse.sendEvent("content_block_delta", anthropicEvent{Type: "content_block_delta", Index: &i, Delta: d})
}

// stop closes the open block; a thinking block gets its signature first.
func (b *blockStream) stop() error {
	if b.open == "" {
		return nil
	}
	if b.open == "thinking" {
		sig := thinkingSignature(b.reasoning.String())
		if err := b.delta(anthropicDeltaOut{Type: "signature_delta", Signature: &sig}); err != nil {
			return err
		}
	}
	b.open = ""
	i := b.next - 1
	return b.sse.sendEvent("content_block_stop", anthropicEvent{Type: "content_block_stop", Index: &i})
}

func (b *blockStream) thinking(r string) error {
	if r == "" {
		return nil
	}
	if b.open != "thinking" {
		if err := b.stop(); err != nil {
			return err
		}
		if err := b.start(anthropicBlockOut{Type: "thinking", Thinking: strPtr(""), Signature: strPtr("")}); err != nil {
			return err
		}
	}
	b.reasoning.WriteString(r)
	if b.omit {
		return nil
	}
	return b.delta(anthropicDeltaOut{Type: "thinking_delta", Thinking: &r})
}

func (b *blockStream) text(t string) error {
	if t == "" {
		return nil
	}
	if b.open != "text" {
		if err := b.stop(); err != nil {
			return err
		}
		if err := b.start(anthropicBlockOut{Type: "text", Text: strPtr("")}); err != nil {
			return err
		}
	}
	return b.delta(anthropicDeltaOut{Type: "text_delta", Text: &t})
}

func (b *blockStream) toolUse(id, name, args string) error {
	if err := b.stop(); err != nil {
		return err
	}
	if err := b.start(anthropicBlockOut{Type: "tool_use", ID: id, Name: name, Input: json.RawMessage("{}")}); err != nil {
		return err
	}
	in := toolInput(args)
	if err := b.delta(anthropicDeltaOut{Type: "input_json_delta", PartialJSON: &in}); err != nil {
		return err
	}
	b.open = "tool_use"
	return b.stop()
}

func (g *messagesGen) stream(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, info *requestInfo, choices []*choice) {
	sse := g.s.startSSE(w, anthropicPing)
	defer sse.close()
	start := g.message()
	// The prefix-cache hit is known once the prompt is admitted; the final
	// message_delta carries the usage as it is.
	start.Usage = anthropicUsageJSON{InputTokens: g.prompt}
	sse.sendEvent("message_start", anthropicEvent{Type: "message_start", Message: start})
	sse.sendEvent("ping", anthropicEvent{Type: "ping"})
	blocks := &blockStream{sse: sse, omit: g.req.OmitThinking}
	_, err := g.s.runChoices(ctx, cancel, choices, g.opt, func(c *choice, d delta) error {
		r, t := g.reply.feed(d, g.s.log)
		if err := blocks.thinking(r); err != nil {
			return err
		}
		return blocks.text(t)
	})
	info.attrs = append(info.attrs, slog.Int("completion_tokens", g.reply.tokens))
	if err != nil {
		if sse.failed() {
			info.clientGone = true
			return
		}
		if aerr := failure(ctx, info, err); aerr != nil {
			sse.sendEvent("error", anthropicErrorBody(aerr))
		}
		return
	}
	if blocks.next == 0 && len(g.reply.calls) == 0 {
		blocks.start(anthropicBlockOut{Type: "text", Text: strPtr("")}) // a reply with no text still has its text block
	}
	blocks.stop()
	for i, id := range g.toolUseIDs() {
		blocks.toolUse(id, g.reply.calls[i].Name, g.reply.calls[i].Arguments)
	}
	reason, seq := g.stopReason()
	u := g.usage()
	sse.sendEvent("message_delta", anthropicEvent{Type: "message_delta", Delta: anthropicStopDelta{StopReason: reason, StopSequence: seq}, Usage: &u})
	sse.sendEvent("message_stop", anthropicEvent{Type: "message_stop"})
	info.attrs = append(info.attrs, slog.String("finish", *reason))
}
