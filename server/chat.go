package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/strata-inference/strata/engine"
	"github.com/strata-inference/strata/tokenizer/chat"
)

// Response shapes of /v1/chat/completions, as OpenAI's API has them.
type (
	usageJSON struct {
		PromptTokens            int                     `json:"prompt_tokens"`
		CompletionTokens        int                     `json:"completion_tokens"`
		TotalTokens             int                     `json:"total_tokens"`
		PromptTokensDetails     promptTokensDetailsJSON `json:"prompt_tokens_details"`
		CompletionTokensDetails *completionDetailsJSON  `json:"completion_tokens_details,omitempty"`
	}

	promptTokensDetailsJSON struct {
		CachedTokens int `json:"cached_tokens"`
	}

	completionDetailsJSON struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	}

	chatCompletionJSON struct {
		ID      string           `json:"id"`
		Object  string           `json:"object"`
		Created int64            `json:"created"`
		Model   string           `json:"model"`
		Choices []chatChoiceJSON `json:"choices"`
		Usage   usageJSON        `json:"usage"`
	}

	chatChoiceJSON struct {
		Index        int               `json:"index"`
		Message      chatMessageJSON   `json:"message"`
		Logprobs     *chatLogprobsJSON `json:"logprobs"`
		FinishReason string            `json:"finish_reason"`
	}

	chatMessageJSON struct {
		Role             string         `json:"role"`
		Content          *string        `json:"content"`
		Refusal          *string        `json:"refusal"` // always null: the server never refuses
		ReasoningContent *string        `json:"reasoning_content,omitempty"`
		ToolCalls        []toolCallJSON `json:"tool_calls,omitempty"`
	}

	toolCallJSON struct {
		Index    *int             `json:"index,omitempty"` // in stream deltas only
		ID       string           `json:"id"`
		Type     string           `json:"type"`
		Function toolFunctionJSON `json:"function"`
	}

	toolFunctionJSON struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}

	chatLogprobsJSON struct {
		Content []tokenLogprobJSON `json:"content"`
		Refusal []tokenLogprobJSON `json:"refusal"`
	}

	tokenLogprobJSON struct {
		Token       string           `json:"token"`
		Logprob     float64          `json:"logprob"`
		Bytes       []int            `json:"bytes"`
		TopLogprobs []topLogprobJSON `json:"top_logprobs"`
	}

	topLogprobJSON struct {
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
		Bytes   []int   `json:"bytes"`
	}

	chatChunkJSON struct {
		ID      string                `json:"id"`
		Object  string                `json:"object"`
		Created int64                 `json:"created"`
		Model   string                `json:"model"`
		Choices []chatChunkChoiceJSON `json:"choices"`
		// Usage is absent, or with include_usage null on every chunk but
		// the last, which has the usage and no choices.
		Usage any `json:"usage,omitempty"`
	}

	chatChunkChoiceJSON struct {
		Index        int               `json:"index"`
		Delta        chatDeltaJSON     `json:"delta"`
		Logprobs     *chatLogprobsJSON `json:"logprobs"`
		FinishReason *string           `json:"finish_reason"`
	}

	chatDeltaJSON struct {
		Role             string         `json:"role,omitempty"`
		Content          *string        `json:"content,omitempty"`
		ReasoningContent string         `json:"reasoning_content,omitempty"`
		ToolCalls        []toolCallJSON `json:"tool_calls,omitempty"`
	}
)

// chatLogprobs converts tokens to OpenAI's chat log-probability entries.
func (s *Server) chatLogprobs(toks []tokenOut) []tokenLogprobJSON {
	out := make([]tokenLogprobJSON, len(toks))
	for i, t := range toks {
		text, b := s.tokenString(t.id)
		e := tokenLogprobJSON{Token: text, Logprob: finiteLogprob(t.logprob), Bytes: b, TopLogprobs: make([]topLogprobJSON, len(t.top))}
		for k, alt := range t.top {
			at, ab := s.tokenString(alt.Token)
			e.TopLogprobs[k] = topLogprobJSON{Token: at, Logprob: finiteLogprob(alt.Logprob), Bytes: ab}
		}
		out[i] = e
	}
	return out
}

// toolCalls gives parsed calls their OpenAI shape and fresh ids.
func toolCalls(calls []chat.ToolCall, withIndex bool) []toolCallJSON {
	out := make([]toolCallJSON, len(calls))
	for i, c := range calls {
		out[i] = toolCallJSON{ID: newID("call_"), Type: "function", Function: toolFunctionJSON{Name: c.Name, Arguments: c.Arguments}}
		if withIndex {
			out[i].Index = &i
		}
	}
	return out
}

// jsonNull is an explicit null where a field would otherwise be omitted.
var jsonNull = json.RawMessage("null")

// chatUsage is the usage of a chat or completions response: each prompt's
// tokens once (cached those the prefix cache supplied), every generated
// token, and with thinking the tokens whose text was reasoning.
func chatUsage(prompt, completion, cached int, reasoning *int) usageJSON {
	u := usageJSON{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion,
		PromptTokensDetails: promptTokensDetailsJSON{CachedTokens: cached}}
	if reasoning != nil {
		u.CompletionTokensDetails = &completionDetailsJSON{ReasoningTokens: *reasoning}
	}
	return u
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	info := infoOf(r.Context())
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	req, aerr := decodeChatRequest(body, s.eng.Model().VocabSize())
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if req.Model != s.opt.ModelName {
		writeError(w, modelNotFound(req.Model, s.opt.ModelName))
		return
	}
	if req.N > s.opt.MaxChoices {
		writeError(w, invalidf("n", "invalid_value", "n must be at most %d on this server, not %d.", s.opt.MaxChoices, req.N))
		return
	}
	mkConstraint, aerr := s.constraint(&req.Structured, req.Tools, req.Chat, true) // structured.go
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	text, err := s.format.Render(req.Messages, req.Tools, req.Chat)
	if err != nil {
		writeError(w, invalidf("messages", "invalid_value", "The conversation cannot be rendered as a %s prompt: %v.", s.format.Name(), err))
		return
	}
	promptToks := s.tok.Encode(text, true)
	maxTokens, aerr := s.budget(len(promptToks), req.MaxTokens, s.opt.DefaultMaxTokens, "messages")
	if aerr == nil {
		aerr = checkMinTokens(req.MinTokens, maxTokens)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	gctx, stop := s.genContext(r)
	defer stop()
	ctx, cancel := context.WithCancel(gctx)
	defer cancel()
	reqs := make([]engine.Request, req.N)
	for i := range reqs {
		reqs[i] = engineRequest(&req.genParams, promptToks, maxTokens, i)
	}
	constrain(reqs, mkConstraint)
	choices, aerr := s.submit(ctx, reqs, req.N)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	s.metrics.promptTokens.Add(float64(len(promptToks)))
	info.attrs = append(info.attrs, slog.String("model", req.Model), slog.Bool("stream", req.Stream),
		slog.Int("n", req.N), slog.Bool("thinking", req.Chat.Thinking), slog.Int("prompt_tokens", len(promptToks)))
	if req.User != "" {
		info.attrs = append(info.attrs, slog.String("user", req.User))
	}

	g := chatGen{
		s: s, req: req, id: newID("chatcmpl-"), created: time.Now().Unix(), promptTokens: len(promptToks),
		opt: s.chatOptionsFor(&req.genParams, start),
	}
	g.states = make([]*chatChoiceState, len(choices))
	for i := range g.states {
		g.states[i] = &chatChoiceState{reply: newReply(s.format, req.Chat, req.Tools)}
		g.states[i].single = req.SingleToolCall
	}
	if req.Stream {
		g.stream(ctx, cancel, w, info, choices)
	} else {
		g.complete(ctx, cancel, w, info, choices)
	}
}

// checkMinTokens checks min_tokens against the tokens a choice may make.
func checkMinTokens(minTokens, maxTokens int) *apiError {
	if minTokens > maxTokens {
		return invalidf("min_tokens", "invalid_value", "min_tokens %d is more than the %d tokens a choice may generate.", minTokens, maxTokens)
	}
	return nil
}

// chatGen is one chat completion request being generated.
type chatGen struct {
	s            *Server
	req          *chatRequest
	id           string
	created      int64
	promptTokens int
	opt          genOptions
	states       []*chatChoiceState
}

// chatChoiceState follows one choice: its reply and, in a stream, the
// log-probabilities not sent yet.
type chatChoiceState struct {
	*reply
	logprobs []tokenLogprobJSON
}

// runChoices runs every choice in its own goroutine and waits for all. The
// first failure cancels the rest (through cancel) and is returned; ctx's
// error is returned only when nothing else failed.
func (s *Server) runChoices(ctx context.Context, cancel context.CancelFunc, choices []*choice, o genOptions, emit func(c *choice, d delta) error) ([]int, error) {
	counts := make([]int, len(choices))
	errs := make([]error, len(choices))
	var wg sync.WaitGroup
	for i, c := range choices {
		wg.Go(func() {
			counts[i], errs[i] = s.run(ctx, c, o, func(d delta) error { return emit(c, d) })
			if errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	var first error
	for _, err := range errs {
		switch {
		case err == nil:
		case first == nil, errors.Is(first, context.Canceled) && !errors.Is(err, context.Canceled):
			first = err
		}
	}
	return counts, first
}

// usage is the response's usage: the prompt once, cached tokens as the
// first choice's prompt hit, reasoning tokens in thinking mode.
func (g *chatGen) usage(completion int) usageJSON {
	var reasoning *int
	if g.req.Chat.Thinking {
		n := 0
		for _, st := range g.states {
			n += st.reasoningTokens
		}
		reasoning = &n
	}
	return chatUsage(g.promptTokens, completion, g.states[0].cached, reasoning)
}

func (g *chatGen) complete(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, info *requestInfo, choices []*choice) {
	counts, err := g.s.runChoices(ctx, cancel, choices, g.opt, func(c *choice, d delta) error {
		st := g.states[c.index]
		st.feed(d, g.s.log)
		if g.req.Logprobs >= 0 {
			st.logprobs = append(st.logprobs, g.s.chatLogprobs(d.tokens)...)
		}
		return nil
	})
	completion := sum(counts)
	info.attrs = append(info.attrs, slog.Int("completion_tokens", completion))
	if err != nil {
		fail(ctx, w, info, err)
		return
	}
	resp := chatCompletionJSON{
		ID: g.id, Object: "chat.completion", Created: g.created, Model: g.req.Model,
		Usage: g.usage(completion),
	}
	for i, st := range g.states {
		msg := chatMessageJSON{Role: "assistant"}
		// content is null when the reply has none but made tool calls or
		// only reasoned (a reply cut by length inside its reasoning).
		if content := st.content.String(); content != "" || (len(st.calls) == 0 && st.reasoning.Len() == 0) {
			msg.Content = &content
		}
		if st.reasoning.Len() > 0 || g.req.Chat.Thinking {
			r := st.reasoning.String()
			msg.ReasoningContent = &r
		}
		msg.ToolCalls = toolCalls(st.calls, false)
		ch := chatChoiceJSON{Index: i, Message: msg, FinishReason: st.finish}
		if g.req.Logprobs >= 0 {
			ch.Logprobs = &chatLogprobsJSON{Content: st.logprobs, Refusal: []tokenLogprobJSON{}}
		}
		resp.Choices = append(resp.Choices, ch)
		info.attrs = append(info.attrs, slog.String("finish", st.finish))
	}
	writeJSON(w, http.StatusOK, resp)
}

// isCancel reports whether err is a context's end: the client went away or
// the response was abandoned.
func isCancel(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// failure is what a generation error before anything was sent tells the
// client, or nil when the client is gone.
func failure(ctx context.Context, info *requestInfo, err error) *apiError {
	if shuttingDown(ctx) {
		info.attrs = append(info.attrs, slog.Bool("shutdown", true))
		return shutdownError()
	}
	if isCancel(err) {
		info.clientGone = true
		return nil
	}
	info.attrs = append(info.attrs, slog.String("err", err.Error()))
	return apiErrorFor(err)
}

// fail reports a generation error before anything was sent, unless the
// client is gone.
func fail(ctx context.Context, w http.ResponseWriter, info *requestInfo, err error) {
	if aerr := failure(ctx, info, err); aerr != nil {
		writeError(w, aerr)
	}
}

func (g *chatGen) chunk(choices ...chatChunkChoiceJSON) chatChunkJSON {
	c := chatChunkJSON{ID: g.id, Object: "chat.completion.chunk", Created: g.created, Model: g.req.Model, Choices: choices}
	if g.req.IncludeUsage {
		c.Usage = jsonNull
	}
	return c
}

func (g *chatGen) stream(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, info *requestInfo, choices []*choice) {
	sse := g.s.startSSE(w, "")
	defer sse.close()
	empty := ""
	for _, c := range choices {
		sse.send(g.chunk(chatChunkChoiceJSON{Index: c.index, Delta: chatDeltaJSON{Role: "assistant", Content: &empty}}))
	}
	counts, err := g.s.runChoices(ctx, cancel, choices, g.opt, func(c *choice, d delta) error {
		st := g.states[c.index]
		r, t := st.feed(d, g.s.log)
		if g.req.Logprobs >= 0 {
			st.logprobs = append(st.logprobs, g.s.chatLogprobs(d.tokens)...)
		}
		ch := chatChunkChoiceJSON{Index: c.index, Delta: chatDeltaJSON{ReasoningContent: r}}
		if t != "" {
			ch.Delta.Content = &t
		}
		if d.finish != "" {
			ch.Delta.ToolCalls = toolCalls(st.calls, true)
		}
		if r != "" || t != "" || len(ch.Delta.ToolCalls) > 0 {
			// Log-probabilities ride with the text; those of tokens whose
			// text the parser holds back wait for the next chunk.
			if g.req.Logprobs >= 0 {
				ch.Logprobs = &chatLogprobsJSON{Content: st.logprobs, Refusal: []tokenLogprobJSON{}}
				st.logprobs = nil
			}
			if err := sse.send(g.chunk(ch)); err != nil {
				return err
			}
		}
		if d.finish == "" {
			return nil
		}
		last := chatChunkChoiceJSON{Index: c.index, FinishReason: &st.finish}
		if g.req.Logprobs >= 0 && len(st.logprobs) > 0 {
			last.Logprobs = &chatLogprobsJSON{Content: st.logprobs, Refusal: []tokenLogprobJSON{}}
		}
		return sse.send(g.chunk(last))
	})
	completion := sum(counts)
	info.attrs = append(info.attrs, slog.Int("completion_tokens", completion))
	if err != nil {
		if shuttingDown(ctx) {
			// Every choice cut short ends with a finish reason, then the error.
			abort := "abort"
			for i, st := range g.states {
				if st.finish == "" {
					sse.send(g.chunk(chatChunkChoiceJSON{Index: i, FinishReason: &abort}))
				}
			}
		}
		streamFail(ctx, sse, info, err)
		return
	}
	for _, st := range g.states {
		info.attrs = append(info.attrs, slog.String("finish", st.finish))
	}
	if g.req.IncludeUsage {
		c := g.chunk()
		c.Choices = []chatChunkChoiceJSON{}
		c.Usage = g.usage(completion)
		sse.send(c)
	}
	sse.done()
}

// streamFail ends an OpenAI event stream with an error event, unless the
// client is gone.
func streamFail(ctx context.Context, sse *sseWriter, info *requestInfo, err error) {
	if sse.failed() {
		info.clientGone = true
		info.attrs = append(info.attrs, slog.Bool("client_gone", true))
		return
	}
	aerr := failure(ctx, info, err)
	if aerr == nil {
		info.attrs = append(info.attrs, slog.Bool("client_gone", true))
		return
	}
	sse.send(aerr.body())
	sse.done()
}

func sum(xs []int) int {
	t := 0
	for _, x := range xs {
		t += x
	}
	return t
}
