package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"sync"

	"github.com/strata-inference/strata/cache"
)

// A request's complete state can leave one engine and resume in another
// (a prefill worker hands finished prompts to a decode worker). The format,
// version 2, little-endian:
//
//	"STRATAHO"                magic, 8 bytes
//	uint32                    format version (2)
//	uint32 n, n bytes         JSON header (handoffHeader): the model's
//	                          fingerprint, the request's parameters, its
//	                          tokens so far, and the sampler's state
//	the sequence's cache state, as cache.Seq.WriteState writes it
//	uint32                    CRC-32 (IEEE) of everything before it
//
// The state is streamed both ways: the sender writes the pages as it reads
// them from its pool, and the receiver reads them straight into pages of
// its own, so neither holds the whole state in memory. The receiving engine
// rejects a state with another magic, version or model fingerprint, a bad
// checksum, or cache kinds unlike its own, with an error that says which.
// docs/handoff.md describes the format for other tools.

const (
	handoffMagic   = "STRATAHO"
	handoffVersion = 2
	maxHandoffJSON = 64 << 20
)

// FinishHandoff ends a request whose state was handed off: its last event
// carries the state (Event.Handoff) instead of more tokens.
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

// Handoff is a request's state on its way out of the engine: the request
// has ended here, but its pages stay in the pool until the state is
// written (WriteTo) or given up (Close). Whoever receives a FinishHandoff
// event must do one of the two.
type Handoff struct {
	header []byte // magic, version and the JSON header
	mu     sync.Mutex
	cs     *cache.Seq // nil once written or closed
	size   int64
}

// newHandoff captures s, which holds the state of every token but the last
// (the sampled, not yet fed one); it takes over s's pages.
func (e *Engine) newHandoff(s *seq) (*Handoff, error) {
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
	var hdr []byte
	hdr = append(hdr, handoffMagic...)
	hdr = binary.LittleEndian.AppendUint32(hdr, handoffVersion)
	hdr = binary.LittleEndian.AppendUint32(hdr, uint32(len(js)))
	hdr = append(hdr, js...)
	cs := s.cs
	s.cs = nil // the Handoff owns the pages now
	return &Handoff{header: hdr, cs: cs, size: int64(len(hdr)) + cache.StateBytes(cs.Specs(), cs.Len()) + 4}, nil
}

// Size is the number of bytes WriteTo writes.
func (h *Handoff) Size() int64 { return h.size }

// WriteTo streams the state to w, page by page, and then returns the
// request's pages to the pool (also when writing fails). It may run on any
// goroutine while the engine runs. A second call fails.
func (h *Handoff) WriteTo(w io.Writer) (int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cs == nil {
		return 0, errors.New("engine: handoff state already written or closed")
	}
	defer func() { h.cs.Release(); h.cs = nil }()
	crc := crc32.NewIEEE()
	bw := bufio.NewWriterSize(w, 64<<10)
	cw := &countWriter{w: io.MultiWriter(bw, crc)}
	cw.Write(h.header)
	if err := h.cs.WriteState(cw); err != nil {
		return cw.n, err
	}
	cw.w = bw // the checksum covers everything before it
	binary.Write(cw, binary.LittleEndian, crc.Sum32())
	if cw.err == nil {
		cw.err = bw.Flush()
	}
	return cw.n, cw.err
}

// Close gives the state up, returning its pages to the pool, unless it
// was written.
func (h *Handoff) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cs != nil {
		h.cs.Release()
		h.cs = nil
	}
}

// countWriter counts bytes and keeps the first error.
type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

// ErrHandoff wraps every reason a state is refused.
var ErrHandoff = errors.New("engine: handoff state rejected")

// MaxHandoffBytes is the largest state this engine accepts: a request at
// the engine's context limit (or, without one, the whole pool's worth of
// tokens), plus its header.
func (e *Engine) MaxHandoffBytes() int64 {
	n := e.maxStateTokens()
	return int64(len(handoffMagic)+8+maxHandoffJSON) + cache.StateBytes(e.m.CacheSpecs(), n) + 4
}

// Resume continues a request from a state another engine handed off,
// reading it from r straight into pages of this engine's pool. The state
// must come from the same model (same fingerprint) and format version and
// fit the pool now (ErrNoSpace, wrapped, when it does not: try later). The
// request then waits for admission in the queue like any submitted one
// (ErrOverloaded when the queue is full). Output arrives on the returned
// stream as for Submit, starting with the token after the ones the state
// holds.
func (e *Engine) Resume(ctx context.Context, r io.Reader) (*Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	crc := crc32.NewIEEE()
	tr := io.TeeReader(r, crc)
	h, err := e.readHandoffHeader(tr)
	if err != nil {
		return nil, err
	}
	req := Request{Prompt: h.Tokens[:h.Prompt], MaxTokens: h.MaxTokens, Sampling: h.Sampling, Stop: h.Stop, IgnoreEOS: h.IgnoreEOS,
		MinTokens: h.MinTokens, WantLogprobs: h.WantLogprobs, Logprobs: h.Logprobs}
	if h.Spec.Method != "" {
		sp := h.Spec
		req.Speculation = &sp
	}
	spec, err := e.resolveSpec(&req)
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
	e.holdStops(smp, &req)
	if need := e.PagesFor(len(h.Tokens)); need > e.pool.NumPages() {
		return nil, fmt.Errorf("%w: a context of %d tokens needs %d cache pages; the pool has %d", ErrHandoff, len(h.Tokens), need, e.pool.NumPages())
	}
	cs, err := e.m.NewSeq(e.poolFor(nil))
	if err != nil {
		return nil, fmt.Errorf("engine: resuming: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			cs.Release()
		}
	}()
	if err := cs.ReadState(tr, e.maxStateTokens()); err != nil {
		if errors.Is(err, cache.ErrNoSpace) {
			return nil, fmt.Errorf("engine: resuming: %w", err)
		}
		return nil, fmt.Errorf("%w: %v", ErrHandoff, err)
	}
	want := crc.Sum32()
	var tail [4]byte
	if _, err := io.ReadFull(r, tail[:]); err != nil {
		return nil, fmt.Errorf("%w: truncated before its checksum: %v", ErrHandoff, err)
	}
	if binary.LittleEndian.Uint32(tail[:]) != want {
		return nil, fmt.Errorf("%w: checksum mismatch (corrupt or truncated)", ErrHandoff)
	}
	if n, _ := r.Read(tail[:1]); n > 0 {
		return nil, fmt.Errorf("%w: bytes after the checksum", ErrHandoff)
	}
	if cs.Len() != len(h.Tokens)-1 {
		return nil, fmt.Errorf("%w: the cache holds %d tokens, the request %d", ErrHandoff, cs.Len(), len(h.Tokens))
	}
	e.mu.Lock()
	if len(e.waiting) >= e.maxQueue {
		e.mu.Unlock()
		return nil, ErrOverloaded
	}
	e.nextID++
	s := &seq{id: e.nextID, ctx: ctx, req: req, tokens: h.Tokens, prompt: h.Prompt, cs: cs, sampler: smp, stream: newStream(e.nextID), spec: spec,
		cached: h.Cached, admitted: true}
	e.waiting = append(e.waiting, s)
	e.mu.Unlock()
	ok = true
	context.AfterFunc(ctx, e.poke)
	e.poke()
	return s.stream, nil
}

// readHandoffHeader reads and checks the magic, the version and the JSON
// header.
func (e *Engine) readHandoffHeader(r io.Reader) (*handoffHeader, error) {
	var pre [len(handoffMagic) + 8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return nil, fmt.Errorf("%w: reading the header: %v", ErrHandoff, err)
	}
	if string(pre[:len(handoffMagic)]) != handoffMagic {
		return nil, fmt.Errorf("%w: not a strata handoff state", ErrHandoff)
	}
	if v := binary.LittleEndian.Uint32(pre[8:]); v != handoffVersion {
		return nil, fmt.Errorf("%w: format version %d, this build reads %d", ErrHandoff, v, handoffVersion)
	}
	n := binary.LittleEndian.Uint32(pre[12:])
	if n > maxHandoffJSON {
		return nil, fmt.Errorf("%w: header of %d bytes", ErrHandoff, n)
	}
	js := make([]byte, n)
	if _, err := io.ReadFull(r, js); err != nil {
		return nil, fmt.Errorf("%w: header truncated: %v", ErrHandoff, err)
	}
	var h handoffHeader
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrHandoff, err)
	}
	if fp := e.fingerprint(); h.Model != fp {
		return nil, fmt.Errorf("%w: made by model %q, this engine runs %q", ErrHandoff, h.Model, fp)
	}
	V := e.m.VocabSize()
	switch {
	case h.Prompt <= 0 || h.Prompt > len(h.Tokens):
		return nil, fmt.Errorf("%w: prompt of %d tokens with %d tokens in all", ErrHandoff, h.Prompt, len(h.Tokens))
	case h.MaxTokens <= len(h.Tokens)-h.Prompt:
		return nil, fmt.Errorf("%w: %d of %d tokens already generated", ErrHandoff, len(h.Tokens)-h.Prompt, h.MaxTokens)
	case e.cfg.MaxContext > 0 && h.Prompt+h.MaxTokens > e.cfg.MaxContext:
		return nil, fmt.Errorf("%w: prompt of %d tokens plus %d to generate exceeds the context of %d", ErrHandoff, h.Prompt, h.MaxTokens, e.cfg.MaxContext)
	}
	for _, t := range h.Tokens {
		if t < 0 || int(t) >= V {
			return nil, fmt.Errorf("%w: token %d outside the vocabulary of %d", ErrHandoff, t, V)
		}
	}
	if err := h.Sampling.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrHandoff, err)
	}
	for t := range h.Sampling.LogitBias {
		if t < 0 || int(t) >= V {
			return nil, fmt.Errorf("%w: logit bias token %d outside the vocabulary of %d", ErrHandoff, t, V)
		}
	}
	for _, t := range h.Stop {
		if t < 0 || int(t) >= V {
			return nil, fmt.Errorf("%w: stop token %d outside the vocabulary of %d", ErrHandoff, t, V)
		}
	}
	if h.MinTokens < 0 || h.MinTokens > h.MaxTokens || h.Cached < 0 || h.Cached > h.Prompt {
		return nil, fmt.Errorf("%w: min tokens %d, cached tokens %d (max tokens %d, prompt %d)", ErrHandoff, h.MinTokens, h.Cached, h.MaxTokens, h.Prompt)
	}
	return &h, nil
}

// maxStateTokens bounds the tokens a handed-off state may hold (0: no
// bound beyond the pool).
func (e *Engine) maxStateTokens() int { return e.cfg.MaxContext }
