package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/model"
)

// seq is one request's life in the engine.
type seq struct {
	id      uint64
	ctx     context.Context
	req     Request
	tokens  []int32 // prompt, then generated tokens
	prompt  int     // len(req.Prompt)
	cs      *cache.Seq
	sampler *sampler
	stream  *Stream
	// snapAt are positions where the prefix cache wants this request's
	// state; chunks end there. decodeSnap is its latest decode snapshot.
	snapAt     []int
	decodeSnap *snapshot
}

// chunk caps n tokens starting at from so the chunk ends at the next
// snapshot point.
func (s *seq) chunk(from, n int) int {
	for _, p := range s.snapAt {
		if p > from {
			return min(n, p-from)
		}
	}
	return n
}

// computed is how many tokens' state the cache holds (0 when not admitted).
func (s *seq) computed() int {
	if s.cs == nil {
		return 0
	}
	return s.cs.Len
}

// release returns the sequence's pages to the pool.
func (s *seq) release() {
	if s.cs != nil {
		s.cs.Release()
		s.cs = nil
	}
}

func (s *seq) finish(reason FinishReason, err error) {
	s.release()
	s.stream.push(Event{Finish: reason, Err: err, PromptTokens: s.prompt, OutputTokens: len(s.tokens) - s.prompt})
	s.stream.close()
}

// planned is one sequence's share of a step.
type planned struct {
	s *seq
	n int // tokens to compute this step
}

// Step runs one scheduling step and one forward pass over the batch it
// forms. It reports whether there was anything to do.
func (e *Engine) Step(ctx context.Context) (bool, error) {
	e.mu.Lock()
	e.dropCancelled()
	plan := e.schedule()
	e.mu.Unlock()
	if len(plan) == 0 {
		return false, nil
	}

	b := &model.Batch{}
	for _, p := range plan {
		s := p.s
		start := s.computed()
		lg := model.NoLogits
		if start+p.n == len(s.tokens) {
			lg = model.LastLogits
		}
		if s.req.OnLogits != nil {
			lg = model.AllLogits
		}
		b.Spans = append(b.Spans, model.Span{Seq: s.cs, Start: len(b.Tokens), Len: p.n, Logits: lg})
		b.Tokens = append(b.Tokens, s.tokens[start:start+p.n]...)
	}
	logits, err := e.m.Forward(ctx, b)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stats.Steps++
	e.stats.MaxBatchSeqs = max(e.stats.MaxBatchSeqs, len(plan))
	if err != nil {
		// The batch's caches are in an unknown state: fail its requests.
		for _, p := range plan {
			e.remove(p.s)
			p.s.finish(FinishError, fmt.Errorf("engine: forward pass: %w", err))
		}
		return true, err
	}
	V := e.m.VocabSize()
	row := 0
	for i, p := range plan {
		s, span := p.s, b.Spans[i]
		start := s.cs.Len - p.n
		var last []float32
		switch span.Logits {
		case model.AllLogits:
			for j := range p.n {
				s.req.OnLogits(start+j, logits[(row+j)*V:(row+j+1)*V])
			}
			last = logits[(row+p.n-1)*V : (row+p.n)*V]
			row += p.n
		case model.LastLogits:
			last = logits[row*V : (row+1)*V]
			row++
		}
		if start < s.prompt {
			e.stats.PromptTokens += int64(min(p.n, s.prompt-start))
		}
		e.snapshot(s)
		if s.cs.Len < len(s.tokens) {
			continue // prefill continues next step
		}
		e.emit(s, last)
	}
	return true, nil
}

// emit picks the next token of s from the logits of its last position, sends
// it, and finishes the request when it is done.
func (e *Engine) emit(s *seq, logits []float32) {
	out := len(s.tokens) - s.prompt
	var tok int32
	if s.req.Forced != nil && out < len(s.req.Forced) {
		tok = s.req.Forced[out]
	} else {
		tok = s.sampler.sample(logits)
	}
	lp, top := logprobs(logits, tok, s.req.Logprobs)
	s.sampler.observe(tok)
	s.tokens = append(s.tokens, tok)
	e.stats.OutTokens++
	ev := Event{Token: tok, Logprob: lp, Top: top, PromptTokens: s.prompt, OutputTokens: out + 1}
	switch {
	case (tok == e.cfg.EOS && !s.req.IgnoreEOS) || slices.Contains(s.req.Stop, tok):
		ev.Finish = FinishStop
	case out+1 >= s.req.MaxTokens:
		ev.Finish = FinishLength
	}
	s.stream.push(ev)
	if ev.Finish != "" {
		e.remove(s)
		s.release()
		s.stream.close()
		e.stats.Finished++
	}
}

// dropCancelled finishes every request whose context has ended.
func (e *Engine) dropCancelled() {
	for _, list := range []*[]*seq{&e.waiting, &e.running} {
		*list = slices.DeleteFunc(*list, func(s *seq) bool {
			if err := s.ctx.Err(); err != nil {
				s.finish(FinishCancelled, err)
				e.stats.Cancelled++
				return true
			}
			return false
		})
	}
}

func (e *Engine) remove(s *seq) {
	e.running = slices.DeleteFunc(e.running, func(x *seq) bool { return x == s })
	e.waiting = slices.DeleteFunc(e.waiting, func(x *seq) bool { return x == s })
}

// schedule picks this step's work. Running sequences go first, in arrival
// order (decodes and continuing prefills alike); waiting ones are admitted
// in arrival order while the token budget, the sequence limit and the pool
// allow, and never past one that does not fit, so none starves. When a
// running sequence cannot get the pages for its tokens, the latest-arriving
// running sequence is preempted (its pages freed, to be recomputed later)
// until it can.
func (e *Engine) schedule() []planned {
	budget := e.cfg.MaxBatchTokens
	var plan []planned
	for i := 0; i < len(e.running) && budget > 0 && len(plan) < e.cfg.MaxSeqs; i++ {
		s := e.running[i]
		n := s.chunk(s.computed(), min(len(s.tokens)-s.computed(), budget))
		for s.cs.Reserve(s.cs.Len+n) != nil {
			if e.prefix != nil && e.prefix.evict(nil) {
				continue
			}
			victim := e.running[len(e.running)-1]
			e.preempt(victim)
			if victim == s {
				break
			}
		}
		if s.cs == nil {
			break // s itself was preempted: everything after it is too
		}
		plan = append(plan, planned{s, n})
		budget -= n
	}
	for len(e.waiting) > 0 && budget > 0 && len(plan) < e.cfg.MaxSeqs {
		s := e.waiting[0]
		n, ok := e.admit(s, budget)
		if !ok {
			break
		}
		e.waiting = e.waiting[1:]
		e.running = append(e.running, s)
		plan = append(plan, planned{s, n})
		budget -= n
	}
	return plan
}

// admit takes the fixed pages of s, restores the longest prefix snapshot of
// its tokens if there is one, and takes the growing pages of the tokens it
// will compute this step (at most budget), all or none. It admits only when
// the pool could hold all of s's tokens so far (evicting snapshots to make
// room), so a request is not admitted to be preempted before its prompt is
// through. It returns the number of tokens to compute.
func (e *Engine) admit(s *seq, budget int) (int, bool) {
	var hit *snapshot
	if e.prefix != nil {
		hit = e.prefix.lookup(s.tokens)
	}
	for e.PagesFor(len(s.tokens)) > e.pool.FreePages() {
		switch {
		case e.prefix == nil:
			return 0, false
		case e.prefix.evict(hit):
		case hit != nil: // the pool cannot hold both: give up the hit
			e.prefix.drop(hit)
			hit = nil
		default:
			return 0, false
		}
	}
	cs, err := e.m.NewSeq(e.pool)
	if err != nil {
		return 0, false
	}
	if hit != nil {
		if err := cs.CopyFrom(hit.seq); err != nil {
			cs.Release()
			return 0, false
		}
	}
	from := cs.Len
	if e.prefix != nil {
		s.snapAt = e.prefix.plan(s.tokens, s.prompt, from)
	}
	n := s.chunk(from, min(len(s.tokens)-from, budget))
	if err := cs.Reserve(from + n); err != nil {
		cs.Release()
		return 0, false
	}
	s.cs = cs
	e.stats.PrefixHitTokens += int64(from)
	return n, true
}

// snapshot records s's state in the prefix cache when it sits at an
// aligned position the cache wants: a planned point, or any aligned
// position of its output (kept as its latest decode snapshot).
func (e *Engine) snapshot(s *seq) {
	p := e.prefix
	if p == nil || s.cs.Len%p.align != 0 || s.cs.Len == 0 {
		return
	}
	if i := slices.Index(s.snapAt, s.cs.Len); i >= 0 {
		s.snapAt = slices.Delete(s.snapAt, i, i+1)
		p.add(e.m, e.pool, s.cs, s.tokens, nil)
		return
	}
	if s.cs.Len <= s.prompt {
		return
	}
	if old := s.decodeSnap; old != nil && old.owner == s {
		p.drop(old)
	}
	if sn := p.add(e.m, e.pool, s.cs, s.tokens, s); sn != nil && sn.owner == s {
		s.decodeSnap = sn
	}
}

// preempt frees the pages of a running sequence and puts it back in the
// waiting queue, in arrival order, to be recomputed from its tokens.
func (e *Engine) preempt(s *seq) {
	s.release()
	e.running = slices.DeleteFunc(e.running, func(x *seq) bool { return x == s })
	i, _ := slices.BinarySearchFunc(e.waiting, s.id, func(x *seq, id uint64) int { return int(x.id) - int(id) })
	e.waiting = slices.Insert(e.waiting, i, s)
	e.stats.Preemptions++
	e.log.Debug("preempted", "request", s.id, "tokens", len(s.tokens))
}

// errClosed is what Recv returns after the last event.
var errClosed = errors.New("engine: stream closed")
