package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/strata-inference/strata/engine"
)

// choice is one engine request: one choice of a response.
type choice struct {
	index  int
	stream *engine.Stream
	cancel context.CancelFunc // ends the engine request
	// firstOfPrompt marks the choice whose prompt tokens usage counts
	// (the first choice of each prompt).
	firstOfPrompt bool
}

// engineSeed maps a request's seed to the engine's; the engine reads 0 as
// "pick one", so 0 gets a fixed stand-in.
func engineSeed(seed int64) uint64 {
	if seed == 0 {
		return 0x9e3779b97f4a7c15
	}
	return uint64(seed)
}

// engineRequest is the engine request for choice i (seed + i) of p.
func engineRequest(p *genParams, promptToks []int32, maxTokens, i int) engine.Request {
	r := engine.Request{
		Prompt:    promptToks,
		MaxTokens: maxTokens,
		Sampling:  p.Sampling,
		Stop:      p.StopTokens,
		IgnoreEOS: p.IgnoreEOS,
		MinTokens: min(p.MinTokens, maxTokens),
		Logprobs:  max(p.Logprobs, 0),
		// Log-softmax over the vocabulary costs a pass per token: only
		// when the client asks.
		WantLogprobs: p.Logprobs >= 0,
	}
	if p.HasSeed {
		r.Sampling.Seed = engineSeed(p.Seed + int64(i))
	}
	return r
}

// budget checks a prompt of n tokens against the context and returns how
// many tokens each choice may generate: asked, when the request gave it,
// else the rest of the context, capped by def when positive.
func (s *Server) budget(n, asked, def int, param string) (int, *apiError) {
	c := s.maxContext
	switch {
	case n == 0:
		return 0, invalidf("", "empty_prompt", "The prompt is empty.")
	case n >= c:
		return 0, invalidf(param, "context_length_exceeded",
			"This model's maximum context length is %d tokens, but the prompt has %d tokens, leaving none to generate.", c, n)
	case asked > 0 && n+asked > c:
		return 0, invalidf(param, "context_length_exceeded",
			"This model's maximum context length is %d tokens, but %d tokens were requested (%d in the prompt, %d to generate).", c, n+asked, n, asked)
	case asked > 0:
		return asked, nil
	case def > 0:
		return min(c-n, def), nil
	}
	return c - n, nil
}

// submit starts the engine requests, all or none: if one cannot start, the
// ones already started are cancelled. They end when ctx ends. Each prompt
// has perPrompt consecutive requests.
func (s *Server) submit(ctx context.Context, reqs []engine.Request, perPrompt int) ([]*choice, *apiError) {
	out := make([]*choice, 0, len(reqs))
	for i, r := range reqs {
		if s.opt.DecodeURL != "" && r.MaxTokens > 1 && r.Constraint == nil { // a constraint's state does not travel
			r.Handoff = true // a prefill worker: the decode worker generates after the first token
		}
		if !r.IgnoreEOS && len(s.ends) > 0 {
			r.Stop = append(slices.Clip(r.Stop), s.ends...)
		}
		if s.submitHook != nil {
			s.submitHook(&r)
		}
		cctx, cancel := context.WithCancel(ctx)
		st, err := s.eng.Submit(cctx, r)
		if err != nil {
			cancel()
			for _, c := range out {
				c.cancel()
			}
			if errors.Is(err, engine.ErrOverloaded) {
				return nil, overloaded(1)
			}
			return nil, invalidf("", "invalid_request", "The engine refused the request: %v.", err)
		}
		out = append(out, &choice{index: i, stream: st, cancel: cancel, firstOfPrompt: i%max(perPrompt, 1) == 0})
	}
	return out, nil
}

// tokenOut is one generated token with its log-probabilities.
type tokenOut struct {
	id      int32
	logprob float32
	top     []engine.TokenLogprob
}

// delta is what a choice produced since the previous delta: text that is
// final (decoded, and clear of stop strings), the tokens read since the
// previous delta, and on the last one why the choice finished.
type delta struct {
	text   string
	tokens []tokenOut
	finish string // "", "stop" or "length"
	// stop is the stop string that ended the choice, on the last delta.
	stop string
	// cached is the prompt tokens the engine restored from its prefix cache.
	cached int
}

// genOptions say how to turn a choice's tokens into text.
type genOptions struct {
	skipSpecial bool
	stops       []string
	// includeStop keeps the stop string, or the text of the stop token,
	// that ends a choice (the engine's EOS never has text).
	includeStop bool
	start       time.Time // when the request arrived, for time to first token
}

// genOptionsFor are the options of p's choices.
func genOptionsFor(p *genParams, start time.Time) genOptions {
	return genOptions{skipSpecial: p.SkipSpecial, stops: p.Stop, includeStop: p.IncludeStop, start: start}
}

// chatOptionsFor are the options of p's choices when the chat format reads
// them: special tokens are kept for a format whose markup they are
// (SpecialMarkup), its parser removing the markup.
func (s *Server) chatOptionsFor(p *genParams, start time.Time) genOptions {
	o := genOptionsFor(p, start)
	if f, ok := s.format.(SpecialMarkup); ok && f.MarkupIsSpecial() {
		o.skipSpecial = false
	}
	return o
}

// errGeneration wraps an engine failure (as opposed to the request's
// context ending).
type errGeneration struct {
	reason engine.FinishReason
	err    error
}

func (e *errGeneration) Error() string {
	return fmt.Sprintf("generation %s: %v", e.reason, e.err)
}

// apiErrorFor turns an error of run into what the client is told.
func apiErrorFor(err error) *apiError {
	var g *errGeneration
	if errors.As(err, &g) && g.reason == engine.FinishCancelled {
		return &apiError{Status: http.StatusServiceUnavailable, Type: typeOverloaded, Code: "cancelled",
			Message: fmt.Sprintf("The request was cancelled by the server (shutting down?): %v.", g.err)}
	}
	return internalf("Generation failed: %v.", err)
}

// run reads choice c until it finishes and passes its output to emit as
// deltas; a delta is emitted when there is new text or at the end, so
// tokens whose text is held back (an incomplete character, a possible stop
// string) ride with a later delta. The engine's stop token (EOS) is
// counted but its text is never shown. When a stop string is reached the
// engine request is cancelled. run returns the number of tokens generated,
// and ctx's error if it ends first or emit's error if emit fails.
func (s *Server) run(ctx context.Context, c *choice, o genOptions, emit func(delta) error) (int, error) {
	defer c.cancel()
	// A hand-off this reader never takes gives its pages back.
	defer func() { c.stream.Discard() }()
	dec := s.tok.NewDecoder(o.skipSpecial)
	stop := stopMatcher{stops: o.stops}
	var pending []tokenOut
	n, cached := 0, 0
	last := o.start
	for {
		ev, err := c.stream.Recv(ctx)
		if err != nil {
			return n, err
		}
		if ev.Finish == engine.FinishHandoff {
			// The first token ran here; the decode worker makes the rest.
			st, err := s.continueRemote(ctx, ev.Handoff)
			if err != nil {
				return n, &errGeneration{engine.FinishError, err}
			}
			c.stream = st
			continue
		}
		if ev.Finish == engine.FinishCancelled || ev.Finish == engine.FinishError {
			if ctx.Err() != nil {
				return n, ctx.Err()
			}
			return n, &errGeneration{ev.Finish, ev.Err}
		}
		now := time.Now()
		if n == 0 {
			s.metrics.ttft.Observe(now.Sub(o.start).Seconds())
			cached = ev.CachedTokens
			if c.firstOfPrompt {
				s.metrics.cachedTokens.Add(float64(cached))
			}
		} else {
			s.metrics.itl.Observe(now.Sub(last).Seconds())
		}
		last = now
		n++
		s.metrics.genTokens.Inc()
		pending = append(pending, tokenOut{ev.Token, ev.Logprob, ev.Top})
		var piece string
		// FinishStop: the token is the engine's EOS, whose text is never
		// shown, or a stop token, shown only with includeStop.
		if ev.Finish != engine.FinishStop || (o.includeStop && ev.Token != s.eos) {
			piece = dec.Add(ev.Token)
		}
		text, found := stop.Add(piece)
		finish := ""
		switch {
		case found:
			finish = "stop"
		case ev.Finish != "":
			tail, found := stop.Add(dec.Flush())
			text += tail
			if found {
				finish = "stop"
			} else {
				text += stop.Flush()
				finish = string(ev.Finish) // "stop" or "length"
			}
		}
		if text == "" && finish == "" {
			continue
		}
		d := delta{text: text, tokens: pending, finish: finish, cached: cached}
		if finish == "stop" && stop.matched != "" {
			d.stop = stop.matched
			if o.includeStop {
				d.text += stop.matched
			}
		}
		if err := emit(d); err != nil {
			return n, err
		}
		pending = nil
		if finish != "" {
			return n, nil
		}
	}
}

// tokenString returns the text of one token (invalid UTF-8 replaced by
// U+FFFD) and its bytes.
func (s *Server) tokenString(id int32) (string, []int) {
	tok, ok := s.tok.Token(id)
	if !ok {
		return "", []int{}
	}
	raw := byteLevelBytes(tok)
	b := make([]int, len(raw))
	for i, c := range []byte(raw) {
		b[i] = int(c)
	}
	if utf8.ValidString(raw) {
		return raw, b
	}
	return s.tok.Decode([]int32{id}, false), b
}

// byteLevelRune maps GPT-2's byte-level runes back to bytes: -1 for runes
// outside the mapping.
var byteLevelRune = func() (m [0x144]int16) {
	for i := range m {
		m[i] = -1
	}
	n := 0
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			m[b] = int16(b)
		} else {
			m[256+n] = int16(b)
			n++
		}
	}
	return m
}()

// byteLevelBytes returns the bytes a vocabulary token stands for. As in
// Hugging Face's ByteLevel decoder, a token with a rune outside the
// byte-level alphabet (an added token such as "<｜User｜>") stands for
// its own UTF-8 text.
func byteLevelBytes(tok string) string {
	buf := make([]byte, 0, len(tok))
	for _, r := range tok {
		if r >= rune(len(byteLevelRune)) || byteLevelRune[r] < 0 {
			return tok
		}
		buf = append(buf, byte(byteLevelRune[r]))
	}
	return string(buf)
}

// finiteLogprob keeps JSON encodable: OpenAI reports -9999 for tokens
// without a usable probability.
func finiteLogprob(lp float32) float64 {
	v := float64(lp)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return -9999
	}
	return v
}
