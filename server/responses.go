package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/strata-inference/strata/engine"
	"github.com/strata-inference/strata/tokenizer/chat"
)

// OpenAI's Responses API (POST /v1/responses, GET and DELETE
// /v1/responses/{id}): Codex CLI and the Agents SDK speak it. A response
// made with store true keeps its conversation and its token ids, so that
// one continuing it (previous_response_id) starts with exactly the tokens
// the engine already ran, and its prompt hits the prefix cache instead of
// recomputing the conversation.

// Response shapes of the Responses API.
type (
	responseOut struct {
		ID                 string             `json:"id"`
		Object             string             `json:"object"` // "response"
		CreatedAt          int64              `json:"created_at"`
		Status             string             `json:"status"`
		Error              *responseErrorOut  `json:"error"`
		IncompleteDetails  *incompleteOut     `json:"incomplete_details"`
		Instructions       *string            `json:"instructions"`
		MaxOutputTokens    *int               `json:"max_output_tokens"`
		Model              string             `json:"model"`
		Output             []any              `json:"output"`
		ParallelToolCalls  bool               `json:"parallel_tool_calls"`
		PreviousResponseID *string            `json:"previous_response_id"`
		Reasoning          reasoningConfigOut `json:"reasoning"`
		Store              bool               `json:"store"`
		Temperature        float64            `json:"temperature"`
		Text               responseTextOut    `json:"text"`
		ToolChoice         string             `json:"tool_choice"`
		Tools              []json.RawMessage  `json:"tools"`
		TopP               float64            `json:"top_p"`
		Truncation         string             `json:"truncation"`
		Usage              *responseUsageOut  `json:"usage"`
		Metadata           map[string]string  `json:"metadata"`
		MaxToolCalls       *int               `json:"max_tool_calls"`
		User               *string            `json:"user,omitempty"`
	}

	responseErrorOut struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}

	incompleteOut struct {
		Reason string `json:"reason"`
	}

	reasoningConfigOut struct {
		Effort  *string `json:"effort"`
		Summary *string `json:"summary"`
	}

	responseTextOut struct {
		Format struct {
			Type string `json:"type"`
		} `json:"format"`
	}

	responseUsageOut struct {
		InputTokens        int `json:"input_tokens"`
		InputTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokens        int `json:"output_tokens"`
		OutputTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
		TotalTokens int `json:"total_tokens"`
	}

	outputMessageOut struct {
		Type    string          `json:"type"` // "message"
		ID      string          `json:"id"`
		Status  string          `json:"status"`
		Role    string          `json:"role"`
		Content []outputTextOut `json:"content"`
	}

	outputTextOut struct {
		Type        string `json:"type"` // "output_text"
		Text        string `json:"text"`
		Annotations []any  `json:"annotations"`
		Logprobs    []any  `json:"logprobs"`
	}

	reasoningItemOut struct {
		Type             string        `json:"type"` // "reasoning"
		ID               string        `json:"id"`
		Summary          []textPartOut `json:"summary"`
		Content          []textPartOut `json:"content,omitempty"`
		EncryptedContent *string       `json:"encrypted_content,omitempty"`
		Status           string        `json:"status,omitempty"`
	}

	textPartOut struct {
		Type string `json:"type"` // "summary_text" or "reasoning_text"
		Text string `json:"text"`
	}

	functionCallOut struct {
		Type      string `json:"type"` // "function_call"
		ID        string `json:"id"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		Status    string `json:"status"`
	}

	// responseEvent is one event of a response stream; each event sets the
	// fields its type has.
	responseEvent struct {
		Type           string       `json:"type"`
		SequenceNumber int          `json:"sequence_number"`
		Response       *responseOut `json:"response,omitempty"`
		OutputIndex    *int         `json:"output_index,omitempty"`
		ItemID         string       `json:"item_id,omitempty"`
		ContentIndex   *int         `json:"content_index,omitempty"`
		SummaryIndex   *int         `json:"summary_index,omitempty"`
		Item           any          `json:"item,omitempty"`
		Part           any          `json:"part,omitempty"`
		Delta          *string      `json:"delta,omitempty"`
		Text           *string      `json:"text,omitempty"`
		Arguments      *string      `json:"arguments,omitempty"`
		Name           string       `json:"name,omitempty"`
		Logprobs       any          `json:"logprobs,omitempty"`
		Code           *string      `json:"code,omitempty"`
		Message        *string      `json:"message,omitempty"`
		Param          *string      `json:"param,omitempty"`
	}
)

func intPtr(i int) *int { return &i }

func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	info := infoOf(r.Context())
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	req, aerr := decodeResponsesRequest(body, s.eng.Model().VocabSize())
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if req.Model != s.opt.ModelName {
		writeError(w, modelNotFound(req.Model, s.opt.ModelName))
		return
	}
	var prev *storedResponse
	if req.PreviousID != "" {
		var ok bool
		if prev, ok = s.store.get(req.PreviousID); !ok {
			writeError(w, &apiError{Status: http.StatusNotFound, Type: typeInvalidRequest, Param: "previous_response_id", Code: "previous_response_not_found",
				Message: "Previous response with id '" + req.PreviousID + "' not found (only responses made with store true are kept, in memory, a bounded number)."})
			return
		}
	}
	var history []chat.Message
	if prev != nil {
		history = append(history, prev.history...)
	}
	history = append(history, req.Input...)
	msgs := history
	if req.Instructions != nil && *req.Instructions != "" {
		msgs = append([]chat.Message{{Role: chat.RoleSystem, Content: *req.Instructions}}, history...)
	}
	opt := req.Chat
	// A continuation shows the stored response as it was generated,
	// reasoning included, so that its tokens are the very ones the engine
	// ran (DeepSeek-V4 would otherwise drop earlier reasoning without tools).
	opt.KeepReasoning = prev != nil
	text, err := s.format.Render(msgs, req.Tools, opt)
	if err != nil {
		writeError(w, invalidf("input", "invalid_value", "The conversation cannot be rendered as a %s prompt: %v.", s.format.Name(), err))
		return
	}
	promptToks := s.continuationPrompt(prev, text, info)
	maxTokens, aerr := s.budget(len(promptToks), req.MaxTokens, s.opt.DefaultMaxTokens, "input")
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	gctx, stop := s.genContext(r)
	defer stop()
	ctx, cancel := context.WithCancel(gctx)
	defer cancel()
	choices, aerr := s.submit(ctx, []engine.Request{engineRequest(&req.genParams, promptToks, maxTokens, 0)}, 1)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	s.metrics.promptTokens.Add(float64(len(promptToks)))
	info.attrs = append(info.attrs, slog.String("model", req.Model), slog.Bool("stream", req.Stream),
		slog.Bool("thinking", req.Chat.Thinking), slog.Int("prompt_tokens", len(promptToks)))
	if req.User != "" {
		info.attrs = append(info.attrs, slog.String("user", req.User))
	}
	g := &responsesGen{s: s, req: req, id: newID("resp_"), created: time.Now().Unix(), prompt: promptToks, history: history,
		opt: s.chatOptionsFor(&req.genParams, start), rsID: newID("rs_"), msgID: newID("msg_")}
	g.reply = newReply(s.format, req.Chat, req.Tools)
	g.reply.single, g.reply.maxCalls, g.reply.keepIDs = !req.Parallel, req.MaxToolCalls, req.Store
	var final *responseOut
	if req.Stream {
		final = g.stream(ctx, cancel, w, info, choices)
	} else {
		final = g.complete(ctx, cancel, w, info, choices)
	}
	if final != nil && req.Store {
		s.store.put(&storedResponse{resp: final, history: append(slices.Clip(history), g.reply.message(g.callIDs)),
			tokens: append(slices.Clip(promptToks), g.reply.ids...), thinking: req.Chat.Thinking})
	}
}

// continuationPrompt tokenizes text, the rendered prompt of a request that
// continues prev (nil: none). When text starts with the text of prev's
// tokens, as it does when the stored response is re-rendered as it was
// generated, the prompt is prev's tokens themselves followed by the
// tokens of the rest, so the engine's prefix cache holds its state.
func (s *Server) continuationPrompt(prev *storedResponse, text string, info *requestInfo) []int32 {
	if prev != nil {
		if done := s.tok.Decode(prev.tokens, false); strings.HasPrefix(text, done) {
			info.attrs = append(info.attrs, slog.Int("continued_tokens", len(prev.tokens)))
			return append(slices.Clip(prev.tokens), s.tok.Encode(text[len(done):], true)...)
		}
		s.log.Debug("the continued response renders differently from its tokens; the prompt is tokenized afresh", "previous_response_id", prev.resp.ID)
	}
	return s.tok.Encode(text, true)
}

// responsesGen is one Responses API request being generated.
type responsesGen struct {
	s       *Server
	req     *responsesRequest
	id      string
	created int64
	prompt  []int32
	history []chat.Message
	opt     genOptions
	reply   *reply
	// Item ids, fixed before they are streamed: the reasoning item, the
	// message item, and the function calls' (and their call ids) once known.
	rsID, msgID    string
	fcIDs, callIDs []string
	seq            int // stream events sent
}

// response is the response object with the given status and output.
func (g *responsesGen) response(status string, output []any) *responseOut {
	req := g.req
	r := &responseOut{
		ID: g.id, Object: "response", CreatedAt: g.created, Status: status, Instructions: req.Instructions,
		MaxOutputTokens: req.MaxOutput, Model: req.Model, Output: output, ParallelToolCalls: req.Parallel,
		Store: req.Store, Temperature: req.Sampling.Temperature, ToolChoice: req.ToolChoice,
		Tools: req.ToolsJSON, TopP: req.Sampling.TopP, Truncation: "disabled", Metadata: req.Metadata,
	}
	if r.TopP == 0 {
		r.TopP = 1
	}
	if r.Tools == nil {
		r.Tools = []json.RawMessage{}
	}
	if r.Metadata == nil {
		r.Metadata = map[string]string{}
	}
	if r.Output == nil {
		r.Output = []any{}
	}
	if req.PreviousID != "" {
		r.PreviousResponseID = &req.PreviousID
	}
	if req.Effort != "" {
		r.Reasoning.Effort = &req.Effort
	}
	if req.Summary != "" {
		r.Reasoning.Summary = &req.Summary
	}
	if req.MaxToolCalls > 0 {
		r.MaxToolCalls = &req.MaxToolCalls
	}
	if req.User != "" {
		r.User = &req.User
	}
	r.Text.Format.Type = "text"
	return r
}

// finished fills in what the reply's end decides: the status, the usage
// and the tool calls' ids.
func (g *responsesGen) finished() (status string, incomplete *incompleteOut, usage *responseUsageOut) {
	st := g.reply
	g.fcIDs, g.callIDs = make([]string, len(st.calls)), make([]string, len(st.calls))
	for i := range st.calls {
		g.fcIDs[i], g.callIDs[i] = newID("fc_"), newID("call_")
	}
	status = "completed"
	if st.finish == "length" {
		status, incomplete = "incomplete", &incompleteOut{Reason: "max_output_tokens"}
	}
	u := &responseUsageOut{InputTokens: len(g.prompt), OutputTokens: st.tokens, TotalTokens: len(g.prompt) + st.tokens}
	u.InputTokensDetails.CachedTokens = st.cached
	u.OutputTokensDetails.ReasoningTokens = st.reasoningTokens
	return status, incomplete, u
}

// hasMessage reports whether the output has a message item: when the
// reply has content, or nothing else at all.
func (g *responsesGen) hasMessage() bool {
	st := g.reply
	return st.content.Len() > 0 || (len(st.calls) == 0 && st.reasoning.Len() == 0)
}

func (g *responsesGen) reasoningItem(status string) *reasoningItemOut {
	r := g.reply.reasoning.String()
	it := &reasoningItemOut{Type: "reasoning", ID: g.rsID, Summary: []textPartOut{}, Content: []textPartOut{{Type: "reasoning_text", Text: r}}, Status: status}
	if g.req.Summary != "" {
		it.Summary = []textPartOut{{Type: "summary_text", Text: r}}
	}
	if g.req.Encrypted {
		e := encryptedPrefix + base64.StdEncoding.EncodeToString([]byte(r))
		it.EncryptedContent = &e
	}
	return it
}

func (g *responsesGen) messageItem(status string) *outputMessageOut {
	return &outputMessageOut{Type: "message", ID: g.msgID, Status: status, Role: "assistant",
		Content: []outputTextOut{{Type: "output_text", Text: g.reply.content.String(), Annotations: []any{}, Logprobs: []any{}}}}
}

func (g *responsesGen) callItem(i int, status string) *functionCallOut {
	c := g.reply.calls[i]
	return &functionCallOut{Type: "function_call", ID: g.fcIDs[i], CallID: g.callIDs[i], Name: c.Name, Arguments: toolInput(c.Arguments), Status: status}
}

// output is the finished reply as output items.
func (g *responsesGen) output(itemStatus string) []any {
	var out []any
	if g.reply.reasoning.Len() > 0 {
		out = append(out, g.reasoningItem(""))
	}
	if g.hasMessage() {
		out = append(out, g.messageItem(itemStatus))
	}
	for i := range g.reply.calls {
		out = append(out, g.callItem(i, "completed"))
	}
	return out
}

func (g *responsesGen) complete(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, info *requestInfo, choices []*choice) *responseOut {
	_, err := g.s.runChoices(ctx, cancel, choices, g.opt, func(c *choice, d delta) error {
		g.reply.feed(d, g.s.log)
		return nil
	})
	info.attrs = append(info.attrs, slog.Int("completion_tokens", g.reply.tokens))
	if err != nil {
		fail(ctx, w, info, err)
		return nil
	}
	status, incomplete, usage := g.finished()
	itemStatus := "completed"
	if status == "incomplete" {
		itemStatus = "incomplete"
	}
	resp := g.response(status, g.output(itemStatus))
	resp.IncompleteDetails, resp.Usage = incomplete, usage
	info.attrs = append(info.attrs, slog.String("finish", g.reply.finish))
	writeJSON(w, http.StatusOK, resp)
	return resp
}

// itemStream follows the output items of a streamed response: at most one
// open at a time (the reasoning, then the message), in output order.
type itemStream struct {
	g    *responsesGen
	sse  *sseWriter
	next int    // output index of the next item
	open string // "", "reasoning" or "message"
}

func (s *itemStream) send(ev responseEvent) error {
	ev.SequenceNumber = s.g.seq
	s.g.seq++
	return s.sse.sendEvent(ev.Type, ev)
}

// part is the content part a reasoning item streams: its summary when one
// was asked for (strata's summary is the reasoning), else its text.
func (s *itemStream) reasoningPart() (kind string, deltaType string) {
	if s.g.req.Summary != "" {
		return "summary_text", "response.reasoning_summary_text"
	}
	return "reasoning_text", "response.reasoning_text"
}

func (s *itemStream) openItem(kind string) error {
	if err := s.closeItem(); err != nil {
		return err
	}
	s.open = kind
	idx := s.next
	switch kind {
	case "reasoning":
		item := &reasoningItemOut{Type: "reasoning", ID: s.g.rsID, Summary: []textPartOut{}}
		if err := s.send(responseEvent{Type: "response.output_item.added", OutputIndex: &idx, Item: item}); err != nil {
			return err
		}
		pk, _ := s.reasoningPart()
		if pk == "summary_text" {
			return s.send(responseEvent{Type: "response.reasoning_summary_part.added", OutputIndex: &idx, ItemID: s.g.rsID, SummaryIndex: intPtr(0), Part: textPartOut{Type: pk}})
		}
		return s.send(responseEvent{Type: "response.content_part.added", OutputIndex: &idx, ItemID: s.g.rsID, ContentIndex: intPtr(0), Part: textPartOut{Type: pk}})
	case "message":
		item := &outputMessageOut{Type: "message", ID: s.g.msgID, Status: "in_progress", Role: "assistant", Content: []outputTextOut{}}
		if err := s.send(responseEvent{Type: "response.output_item.added", OutputIndex: &idx, Item: item}); err != nil {
			return err
		}
		return s.send(responseEvent{Type: "response.content_part.added", OutputIndex: &idx, ItemID: s.g.msgID, ContentIndex: intPtr(0),
			Part: outputTextOut{Type: "output_text", Annotations: []any{}, Logprobs: []any{}}})
	}
	return nil
}

func (s *itemStream) delta(text string) error {
	idx := s.next
	if s.open == "reasoning" {
		_, dt := s.reasoningPart()
		ev := responseEvent{Type: dt + ".delta", OutputIndex: &idx, ItemID: s.g.rsID, Delta: &text}
		if dt == "response.reasoning_summary_text" {
			ev.SummaryIndex = intPtr(0)
		} else {
			ev.ContentIndex = intPtr(0)
		}
		return s.send(ev)
	}
	return s.send(responseEvent{Type: "response.output_text.delta", OutputIndex: &idx, ItemID: s.g.msgID, ContentIndex: intPtr(0), Delta: &text, Logprobs: []any{}})
}

// closeItem ends the open item with its done events; itemStatus is the
// message's final status.
func (s *itemStream) closeItem() error { return s.closeItemAs("completed") }

func (s *itemStream) closeItemAs(itemStatus string) error {
	idx := s.next
	switch s.open {
	case "":
		return nil
	case "reasoning":
		r := s.g.reply.reasoning.String()
		pk, dt := s.reasoningPart()
		ev := responseEvent{Type: dt + ".done", OutputIndex: &idx, ItemID: s.g.rsID, Text: &r}
		partDone := responseEvent{Type: "response.content_part.done", OutputIndex: &idx, ItemID: s.g.rsID, ContentIndex: intPtr(0), Part: textPartOut{Type: pk, Text: r}}
		if pk == "summary_text" {
			ev.SummaryIndex = intPtr(0)
			partDone = responseEvent{Type: "response.reasoning_summary_part.done", OutputIndex: &idx, ItemID: s.g.rsID, SummaryIndex: intPtr(0), Part: textPartOut{Type: pk, Text: r}}
		} else {
			ev.ContentIndex = intPtr(0)
		}
		for _, e := range []responseEvent{ev, partDone, {Type: "response.output_item.done", OutputIndex: &idx, Item: s.g.reasoningItem("")}} {
			if err := s.send(e); err != nil {
				return err
			}
		}
	case "message":
		item := s.g.messageItem(itemStatus)
		t := item.Content[0].Text
		for _, e := range []responseEvent{
			{Type: "response.output_text.done", OutputIndex: &idx, ItemID: s.g.msgID, ContentIndex: intPtr(0), Text: &t, Logprobs: []any{}},
			{Type: "response.content_part.done", OutputIndex: &idx, ItemID: s.g.msgID, ContentIndex: intPtr(0), Part: item.Content[0]},
			{Type: "response.output_item.done", OutputIndex: &idx, Item: item},
		} {
			if err := s.send(e); err != nil {
				return err
			}
		}
	}
	s.open = ""
	s.next++
	return nil
}

func (s *itemStream) functionCall(i int) error {
	idx := s.next
	s.next++
	item := s.g.callItem(i, "in_progress")
	args := item.Arguments
	added := *item
	added.Arguments = ""
	done := *item
	done.Status = "completed"
	for _, e := range []responseEvent{
		{Type: "response.output_item.added", OutputIndex: &idx, Item: &added},
		{Type: "response.function_call_arguments.delta", OutputIndex: &idx, ItemID: item.ID, Delta: &args},
		{Type: "response.function_call_arguments.done", OutputIndex: &idx, ItemID: item.ID, Arguments: &args, Name: item.Name},
		{Type: "response.output_item.done", OutputIndex: &idx, Item: &done},
	} {
		if err := s.send(e); err != nil {
			return err
		}
	}
	return nil
}

func (g *responsesGen) stream(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, info *requestInfo, choices []*choice) *responseOut {
	sse := g.s.startSSE(w, "")
	defer sse.close()
	items := &itemStream{g: g, sse: sse}
	items.send(responseEvent{Type: "response.created", Response: g.response("in_progress", nil)})
	items.send(responseEvent{Type: "response.in_progress", Response: g.response("in_progress", nil)})
	_, err := g.s.runChoices(ctx, cancel, choices, g.opt, func(c *choice, d delta) error {
		r, t := g.reply.feed(d, g.s.log)
		if r != "" {
			if items.open != "reasoning" {
				if err := items.openItem("reasoning"); err != nil {
					return err
				}
			}
			if err := items.delta(r); err != nil {
				return err
			}
		}
		if t != "" {
			if items.open != "message" {
				if err := items.openItem("message"); err != nil {
					return err
				}
			}
			return items.delta(t)
		}
		return nil
	})
	info.attrs = append(info.attrs, slog.Int("completion_tokens", g.reply.tokens))
	if err != nil {
		if sse.failed() {
			info.clientGone = true
			return nil
		}
		if aerr := failure(ctx, info, err); aerr != nil {
			code := aerr.Code
			if code == "" {
				code = "server_error"
			}
			items.send(responseEvent{Type: "error", Code: &code, Message: &aerr.Message})
			resp := g.response("failed", nil)
			resp.Error = &responseErrorOut{Code: code, Message: aerr.Message}
			items.send(responseEvent{Type: "response.failed", Response: resp})
		}
		return nil
	}
	status, incomplete, usage := g.finished()
	itemStatus := "completed"
	if status == "incomplete" {
		itemStatus = "incomplete"
	}
	if g.hasMessage() && items.open != "message" {
		items.openItem("message") // a reply with no text still has its message
	}
	items.closeItemAs(itemStatus)
	for i := range g.reply.calls {
		items.functionCall(i)
	}
	resp := g.response(status, g.output(itemStatus))
	resp.IncompleteDetails, resp.Usage = incomplete, usage
	kind := "response.completed"
	if status == "incomplete" {
		kind = "response.incomplete"
	}
	items.send(responseEvent{Type: kind, Response: resp})
	info.attrs = append(info.attrs, slog.String("finish", g.reply.finish))
	return resp
}

func (s *Server) handleGetResponse(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	st, ok := s.store.get(id)
	if !ok {
		writeError(w, responseNotFound(id))
		return
	}
	writeJSON(w, http.StatusOK, st.resp)
}

func (s *Server) handleDeleteResponse(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !s.store.remove(id) {
		writeError(w, responseNotFound(id))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "response.deleted", "deleted": true})
}

func responseNotFound(id string) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: "response_not_found",
		Message: "No response with id '" + id + "' is stored (responses made with store true are kept in memory, a bounded number)."}
}
