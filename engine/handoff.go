package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"
)

// A request's complete state can leave one engine and resume in another
// (a prefill worker hands finished prompts to a decode worker). The format,
// version 1, little-endian:
//
//	"STRATAHO"                magic, 8 bytes
//	uint32                    format version (1)
//	uint32 n, n bytes         JSON header (handoffHeader): the model's
//	                          fingerprint, the request's parameters, its
//	                          tokens so far, and the sampler's state
//	the sequence's cache state, as cache.Seq.WriteState writes it
//	uint32                    CRC-32 (IEEE) of everything before it
//
// The receiving engine rejects a state with another magic, version or model
// fingerprint, a bad checksum, or cache kinds unlike its own, with an error
// that says which. docs/handoff.md describes the format for other tools.

const (
	handoffMagic   = "STRATAHO"
	handoffVersion = 1
	maxHandoffJSON = 64 << 20
)

// FinishHandoff ends a request whose state was handed off: its last event
// carries the state (Event.State) instead of more tokens.
const FinishHandoff FinishReason = "handoff"

type handoffHeader struct {
	Model        string      `json:"model"`
	Prompt       int         `json:"prompt_tokens"`
	Tokens       []int32     `json:"tokens"`
	MaxTokens    int         `json:"max_tokens"`
	Sampling     Sampling    `json:"sampling"`
	Stop         []int32     `json:"stop,omitempty"`
	IgnoreEOS    bool        `json:"ignore_eos,omitempty"`
	MinTokens    int         `json:"min_tokens,omitempty"`
	Cached       int         `json:"cached_tokens,omitempty"`
	Logprobs     int         `json:"logprobs,omitempty"`
	WantLogprobs bool        `json:"want_logprobs,omitempty"`
	Spec         Speculation `json:"speculation"`
	RNG          []byte      `json:"rng"`
	Seen         []int32     `json:"seen"`
	Counts       [][2]int32  `json:"counts"`
}

func (e *Engine) fingerprint() string { return e.fp }

// marshalHandoff serializes s, which holds the state of every token but the
// last (the sampled, not yet fed one).
func (e *Engine) marshalHandoff(s *seq) ([]byte, error) {
	rng, err := s.sampler.src.MarshalBinary()
	if err != nil {
		return nil, err
	}
	h := handoffHeader{
		Model: e.fingerprint(), Prompt: s.prompt, Tokens: s.tokens, MaxTokens: s.req.MaxTokens,
		Sampling: s.req.Sampling, Stop: s.req.Stop, IgnoreEOS: s.req.IgnoreEOS, MinTokens: s.req.MinTokens, Cached: s.cached,
		WantLogprobs: s.req.WantLogprobs, Logprobs: s.req.Logprobs, RNG: rng,
	}
	if s.spec != nil {
		h.Spec = Speculation{Method: s.spec.method, MaxDraft: s.spec.maxDraft, Fixed: s.spec.fixed}
	}
	for t := range s.sampler.seen {
		h.Seen = append(h.Seen, t)
	}
	sort.Slice(h.Seen, func(i, j int) bool { return h.Seen[i] < h.Seen[j] })
	for t, c := range s.sampler.counts {
		h.Counts = append(h.Counts, [2]int32{t, int32(c)})
	}
	sort.Slice(h.Counts, func(i, j int) bool { return h.Counts[i][0] < h.Counts[j][0] })
	js, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(handoffMagic)
	binary.Write(&b, binary.LittleEndian, uint32(handoffVersion))
	binary.Write(&b, binary.LittleEndian, uint32(len(js)))
	b.Write(js)
	if err := s.cs.WriteState(&b); err != nil {
		return nil, err
	}
	binary.Write(&b, binary.LittleEndian, crc32.ChecksumIEEE(b.Bytes()))
	return b.Bytes(), nil
}

// ErrHandoff wraps every reason a state is refused.
var ErrHandoff = errors.New("engine: handoff state rejected")

// Resume continues a request from a state another engine handed off. The
// state must come from the same model (same fingerprint) and format
// version; its pages are taken from the pool at once (ErrNoSpace, wrapped,
// when the pool is short). Output arrives on the returned stream as for
// Submit, starting with the token after the ones the state holds.
func (e *Engine) Resume(ctx context.Context, state []byte) (*Stream, error) {
	h, body, err := e.parseHandoff(state)
	if err != nil {
		return nil, err
	}
	r := Request{Prompt: h.Tokens[:h.Prompt], MaxTokens: h.MaxTokens, Sampling: h.Sampling, Stop: h.Stop, IgnoreEOS: h.IgnoreEOS,
		MinTokens: h.MinTokens, WantLogprobs: h.WantLogprobs, Logprobs: h.Logprobs}
	if h.Spec.Method != "" {
		sp := h.Spec
		r.Speculation = &sp
	}
	spec, err := e.resolveSpec(&r)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrHandoff, err)
	}
	smp := newSampler(h.Sampling, nil)
	if err := smp.src.UnmarshalBinary(h.RNG); err != nil {
		return nil, fmt.Errorf("%w: sampler state: %v", ErrHandoff, err)
	}
	for _, t := range h.Seen {
		smp.seen[t] = true
	}
	for _, c := range h.Counts {
		smp.counts[c[0]] = int(c[1])
	}
	smp.out = len(h.Tokens) - h.Prompt
	e.holdStops(smp, &r)
	e.mu.Lock()
	defer e.mu.Unlock()
	cs, err := e.m.NewSeq(e.pool)
	if err != nil {
		return nil, err
	}
	if err := cs.ReadState(bytes.NewReader(body), e.maxStateTokens()); err != nil {
		cs.Release()
		return nil, fmt.Errorf("%w: %v", ErrHandoff, err)
	}
	if cs.Len() != len(h.Tokens)-1 {
		cs.Release()
		return nil, fmt.Errorf("%w: the cache holds %d tokens, the request %d", ErrHandoff, cs.Len(), len(h.Tokens))
	}
	e.nextID++
	s := &seq{id: e.nextID, ctx: ctx, req: r, tokens: h.Tokens, prompt: h.Prompt, cs: cs, sampler: smp, stream: newStream(e.nextID), spec: spec,
		cached: h.Cached, admitted: true}
	e.running = append(e.running, s)
	context.AfterFunc(ctx, e.poke)
	e.poke()
	return s.stream, nil
}

func (e *Engine) parseHandoff(b []byte) (*handoffHeader, []byte, error) {
	if len(b) < len(handoffMagic)+12 {
		return nil, nil, fmt.Errorf("%w: %d bytes is too short", ErrHandoff, len(b))
	}
	if string(b[:len(handoffMagic)]) != handoffMagic {
		return nil, nil, fmt.Errorf("%w: not a strata handoff state", ErrHandoff)
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != handoffVersion {
		return nil, nil, fmt.Errorf("%w: format version %d, this build reads %d", ErrHandoff, v, handoffVersion)
	}
	if got, want := binary.LittleEndian.Uint32(b[len(b)-4:]), crc32.ChecksumIEEE(b[:len(b)-4]); got != want {
		return nil, nil, fmt.Errorf("%w: checksum mismatch (corrupt or truncated)", ErrHandoff)
	}
	n := binary.LittleEndian.Uint32(b[12:])
	if n > maxHandoffJSON || int(n) > len(b)-20 {
		return nil, nil, fmt.Errorf("%w: header of %d bytes", ErrHandoff, n)
	}
	var h handoffHeader
	dec := json.NewDecoder(bytes.NewReader(b[16 : 16+n]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return nil, nil, fmt.Errorf("%w: header: %v", ErrHandoff, err)
	}
	if fp := e.fingerprint(); h.Model != fp {
		return nil, nil, fmt.Errorf("%w: made by model %q, this engine runs %q", ErrHandoff, h.Model, fp)
	}
	V := e.m.VocabSize()
	switch {
	case h.Prompt <= 0 || h.Prompt > len(h.Tokens):
		return nil, nil, fmt.Errorf("%w: prompt of %d tokens with %d tokens in all", ErrHandoff, h.Prompt, len(h.Tokens))
	case h.MaxTokens <= len(h.Tokens)-h.Prompt:
		return nil, nil, fmt.Errorf("%w: %d of %d tokens already generated", ErrHandoff, len(h.Tokens)-h.Prompt, h.MaxTokens)
	}
	for _, t := range h.Tokens {
		if t < 0 || int(t) >= V {
			return nil, nil, fmt.Errorf("%w: token %d outside the vocabulary of %d", ErrHandoff, t, V)
		}
	}
	if err := h.Sampling.Validate(); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrHandoff, err)
	}
	for t := range h.Sampling.LogitBias {
		if t < 0 || int(t) >= V {
			return nil, nil, fmt.Errorf("%w: logit bias token %d outside the vocabulary of %d", ErrHandoff, t, V)
		}
	}
	for _, t := range h.Stop {
		if t < 0 || int(t) >= V {
			return nil, nil, fmt.Errorf("%w: stop token %d outside the vocabulary of %d", ErrHandoff, t, V)
		}
	}
	if h.MinTokens < 0 || h.MinTokens > h.MaxTokens || h.Cached < 0 || h.Cached > h.Prompt {
		return nil, nil, fmt.Errorf("%w: min tokens %d, cached tokens %d (max tokens %d, prompt %d)", ErrHandoff, h.MinTokens, h.Cached, h.MaxTokens, h.Prompt)
	}
	return &h, b[16+n : len(b)-4], nil
}

// maxStateTokens bounds the tokens a handed-off state may hold (0: no
// bound beyond the pool).
func (e *Engine) maxStateTokens() int { return e.cfg.MaxContext }
