package server

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/strata-inference/strata/engine"
)

// Response shapes of /v1/completions, as OpenAI's legacy API has them.
type (
	completionJSON struct {
		ID      string                 `json:"id"`
		Object  string                 `json:"object"`
		Created int64                  `json:"created"`
		Model   string                 `json:"model"`
		Choices []completionChoiceJSON `json:"choices"`
		// Usage: as chatChunkJSON's in a stream; always set otherwise.
		Usage any `json:"usage,omitempty"`
	}

	completionChoiceJSON struct {
		Index        int                 `json:"index"`
		Text         string              `json:"text"`
		Logprobs     *legacyLogprobsJSON `json:"logprobs"`
		FinishReason *string             `json:"finish_reason"`
	}

	// legacyLogprobsJSON lists each token's text, log-probability, top
	// alternatives (text to log-probability) and byte offset in the text.
	legacyLogprobsJSON struct {
		Tokens        []string             `json:"tokens"`
		TokenLogprobs []float64            `json:"token_logprobs"`
		TopLogprobs   []map[string]float64 `json:"top_logprobs"`
		TextOffset    []int                `json:"text_offset"`
	}
)

// legacyLogprobs converts tokens to the legacy format; offset is the byte
// offset of the first token's text and is advanced past the tokens.
func (s *Server) legacyLogprobs(toks []tokenOut, offset *int) *legacyLogprobsJSON {
	lp := &legacyLogprobsJSON{
		Tokens:        make([]string, len(toks)),
		TokenLogprobs: make([]float64, len(toks)),
		TopLogprobs:   make([]map[string]float64, len(toks)),
		TextOffset:    make([]int, len(toks)),
	}
	for i, t := range toks {
		text, _ := s.tokenString(t.id)
		lp.Tokens[i] = text
		lp.TokenLogprobs[i] = finiteLogprob(t.logprob)
		lp.TextOffset[i] = *offset
		*offset += len(text)
		top := make(map[string]float64, len(t.top))
		for _, alt := range t.top {
			at, _ := s.tokenString(alt.Token)
			if _, dup := top[at]; !dup { // alternatives come most likely first
				top[at] = finiteLogprob(alt.Logprob)
			}
		}
		lp.TopLogprobs[i] = top
	}
	return lp
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	info := infoOf(r.Context())
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	req, aerr := decodeCompletionRequest(body, s.eng.Model().VocabSize())
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if req.Model != s.opt.ModelName {
		writeError(w, modelNotFound(req.Model, s.opt.ModelName))
		return
	}
	if k := req.N * len(req.Prompts); k > s.opt.MaxChoices {
		writeError(w, invalidf("n", "invalid_value", "n times the number of prompts must be at most %d on this server, not %d.", s.opt.MaxChoices, k))
		return
	}
	mkConstraint, aerr := s.constraint(&req.Structured, nil, ChatOptions{}, false) // structured.go
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	// Tokenize every prompt and check it against the context first.
	toks := make([][]int32, len(req.Prompts))
	echo := make([]string, len(req.Prompts))
	maxTokens := make([]int, len(req.Prompts))
	promptTokens := 0
	for i, p := range req.Prompts {
		if p.IsTokens {
			toks[i] = p.Tokens
			if req.Echo {
				echo[i] = s.tok.Decode(p.Tokens, req.SkipSpecial)
			}
		} else {
			if s.tok.AddBOS() {
				toks[i] = append(toks[i], s.tok.BOS())
			}
			toks[i] = append(toks[i], s.tok.Encode(p.Text, true)...)
			echo[i] = p.Text
		}
		param := "prompt"
		if len(req.Prompts) > 1 {
			param = "prompt[" + strconv.Itoa(i) + "]"
		}
		if maxTokens[i], aerr = s.budget(len(toks[i]), req.MaxTokens, 0, param); aerr == nil {
			aerr = checkMinTokens(req.MinTokens, maxTokens[i])
		}
		if aerr != nil {
			writeError(w, aerr)
			return
		}
		promptTokens += len(toks[i])
	}
	gctx, stop := s.genContext(r)
	defer stop()
	ctx, cancel := context.WithCancel(gctx)
	defer cancel()
	var reqs []engine.Request
	for i := range req.Prompts {
		for k := range req.N {
			reqs = append(reqs, engineRequest(&req.genParams, toks[i], maxTokens[i], k))
		}
	}
	constrain(reqs, mkConstraint)
	choices, aerr := s.submit(ctx, reqs, req.N)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	s.metrics.promptTokens.Add(float64(promptTokens))
	info.attrs = append(info.attrs, slog.String("model", req.Model), slog.Bool("stream", req.Stream),
		slog.Int("n", req.N), slog.Int("prompts", len(req.Prompts)), slog.Int("prompt_tokens", promptTokens))

	g := completionGen{
		s: s, req: req, id: newID("cmpl-"), created: time.Now().Unix(), promptTokens: promptTokens,
		opt: genOptionsFor(&req.genParams, start),
	}
	if req.Echo {
		g.echo = make([]string, len(choices))
		for i := range choices {
			g.echo[i] = echo[i/req.N]
		}
	}
	if req.User != "" {
		info.attrs = append(info.attrs, slog.String("user", req.User))
	}
	if req.Stream {
		g.stream(ctx, cancel, w, info, choices)
	} else {
		g.complete(ctx, cancel, w, info, choices)
	}
}

// completionGen is one completions request being generated.
type completionGen struct {
	s            *Server
	req          *completionRequest
	id           string
	created      int64
	promptTokens int
	opt          genOptions
	echo         []string // per choice, when the request asks for echo
}

// completionChoiceState follows one choice.
type completionChoiceState struct {
	text     strings.Builder
	logprobs *legacyLogprobsJSON
	offset   int
	finish   string
	cached   int
}

func (g *completionGen) complete(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, info *requestInfo, choices []*choice) {
	states := make([]*completionChoiceState, len(choices))
	for i := range states {
		states[i] = &completionChoiceState{}
		if g.echo != nil {
			states[i].text.WriteString(g.echo[i])
			states[i].offset = len(g.echo[i])
		}
		if g.req.Logprobs >= 0 {
			states[i].logprobs = &legacyLogprobsJSON{Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
		}
	}
	counts, err := g.s.runChoices(ctx, cancel, choices, g.opt, func(c *choice, d delta) error {
		st := states[c.index]
		st.text.WriteString(d.text)
		if st.logprobs != nil {
			lp := g.s.legacyLogprobs(d.tokens, &st.offset)
			st.logprobs.Tokens = append(st.logprobs.Tokens, lp.Tokens...)
			st.logprobs.TokenLogprobs = append(st.logprobs.TokenLogprobs, lp.TokenLogprobs...)
			st.logprobs.TopLogprobs = append(st.logprobs.TopLogprobs, lp.TopLogprobs...)
			st.logprobs.TextOffset = append(st.logprobs.TextOffset, lp.TextOffset...)
		}
		st.finish, st.cached = d.finish, d.cached
		return nil
	})
	completion := sum(counts)
	info.attrs = append(info.attrs, slog.Int("completion_tokens", completion))
	if err != nil {
		fail(ctx, w, info, err)
		return
	}
	cached := 0
	for i, c := range choices {
		if c.firstOfPrompt {
			cached += states[i].cached
		}
	}
	resp := completionJSON{
		ID: g.id, Object: "text_completion", Created: g.created, Model: g.req.Model,
		Usage: chatUsage(g.promptTokens, completion, cached, nil),
	}
	for i, st := range states {
		resp.Choices = append(resp.Choices, completionChoiceJSON{Index: i, Text: st.text.String(), Logprobs: st.logprobs, FinishReason: &st.finish})
		info.attrs = append(info.attrs, slog.String("finish", st.finish))
	}
	writeJSON(w, http.StatusOK, resp)
}

func (g *completionGen) chunk(choices ...completionChoiceJSON) completionJSON {
	c := completionJSON{ID: g.id, Object: "text_completion", Created: g.created, Model: g.req.Model, Choices: choices}
	if g.req.IncludeUsage {
		c.Usage = jsonNull
	}
	return c
}

func (g *completionGen) stream(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, info *requestInfo, choices []*choice) {
	sse := g.s.startSSE(w, "")
	defer sse.close()
	for i := range g.echo {
		sse.send(g.chunk(completionChoiceJSON{Index: i, Text: g.echo[i]}))
	}
	offsets := make([]int, len(choices))
	for i := range g.echo {
		offsets[i] = len(g.echo[i])
	}
	finished := make([]bool, len(choices))
	cached := make([]int, len(choices))
	counts, err := g.s.runChoices(ctx, cancel, choices, g.opt, func(c *choice, d delta) error {
		ch := completionChoiceJSON{Index: c.index, Text: d.text}
		if g.req.Logprobs >= 0 {
			ch.Logprobs = g.s.legacyLogprobs(d.tokens, &offsets[c.index])
		}
		if d.finish != "" {
			ch.FinishReason = &d.finish
			finished[c.index] = true
		}
		cached[c.index] = d.cached
		return sse.send(g.chunk(ch))
	})
	completion := sum(counts)
	info.attrs = append(info.attrs, slog.Int("completion_tokens", completion))
	if err != nil {
		if shuttingDown(ctx) {
			abort := "abort"
			for i, done := range finished {
				if !done {
					sse.send(g.chunk(completionChoiceJSON{Index: i, FinishReason: &abort}))
				}
			}
		}
		streamFail(ctx, sse, info, err)
		return
	}
	if g.req.IncludeUsage {
		c := g.chunk()
		c.Choices = []completionChoiceJSON{}
		total := 0
		for i, ch := range choices {
			if ch.firstOfPrompt {
				total += cached[i]
			}
		}
		c.Usage = chatUsage(g.promptTokens, completion, total, nil)
		sse.send(c)
	}
	sse.done()
}
