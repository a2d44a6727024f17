package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

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
	spec       *specState // nil: no speculative decoding
	// cached is the prefix-hit tokens of the first admission (Event.CachedTokens).
	cached   int
	admitted bool
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
	return s.cs.Len()
}

// release returns the sequence's pages to the pool.
func (s *seq) release() {
	if s.cs != nil {
		s.cs.Release()
		s.cs = nil
	}
	if s.spec != nil {
		s.spec.reset()
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
	n int // tokens to compute this step: a prefill chunk, or the last token
	k int // tokens to draft after it (speculative decoding)
}

// tally is what a step's post-processing counts, added to the engine's
// stats when the step publishes.
type tally struct {
	promptTokens, outTokens              int64
	specSteps, specDrafted, specAccepted int64
	draftSeconds                         []float64
}

// Step runs one scheduling step and one forward pass over the batch it
// forms (after the draft passes of speculating requests), in four phases:
// schedule (under the engine's lock: admission, pages, preemption),
// execute (drafts and the forward pass), post-process (sampling, logprobs,
// callbacks, rollback of rejected drafts) and publish (under the lock:
// counters, prefix snapshots, finished requests' pages and last events).
// Only scheduling and publishing hold the lock, so Submit and Stats never
// wait for a forward pass or for sampling. It reports whether there was
// anything to do.
func (e *Engine) Step(ctx context.Context) (bool, error) {
	e.mu.Lock()
	e.dropCancelled()
	plan := e.schedule()
	e.mu.Unlock()
	if len(plan) == 0 {
		return false, nil
	}
	var t tally
	b, logits, fwd, err := e.execute(ctx, plan, &t)
	var done []finished
	if err == nil {
		done = e.postprocess(plan, b, logits, &t)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cost.observe(len(b.Tokens), fwd)
	for _, d := range t.draftSeconds {
		e.cost.observeDraft(d)
	}
	e.stats.Steps++
	e.stats.MaxBatchSeqs = max(e.stats.MaxBatchSeqs, len(plan))
	e.stats.PromptTokens += t.promptTokens
	e.stats.OutTokens += t.outTokens
	e.stats.SpecSteps += t.specSteps
	e.stats.SpecDrafted += t.specDrafted
	e.stats.SpecAccepted += t.specAccepted
	if err != nil {
		// The batch's caches are in an unknown state: fail its requests.
		for _, p := range plan {
			e.remove(p.s)
			p.s.finish(FinishError, fmt.Errorf("engine: forward pass: %w", err))
		}
		return true, err
	}
	for _, p := range plan {
		if !slices.ContainsFunc(done, func(f finished) bool { return f.s == p.s }) {
			e.snapshot(p.s, false)
		}
	}
	for _, f := range done {
		// A finished turn's state is the next turn's prefix.
		if f.last.Finish == FinishStop || f.last.Finish == FinishLength {
			e.snapshot(f.s, true)
		}
		e.remove(f.s)
		f.s.release()
		f.s.stream.push(f.last)
		f.s.stream.close()
		e.stats.Finished++
	}
	return true, nil
}

// finished is a request done this step and its last event, sent once its
// pages are back in the pool.
type finished struct {
	s    *seq
	last Event
}

// execute runs the drafts of speculating requests and the forward pass
// over the plan's batch, returning the batch, its logits and the forward
// pass's time in seconds.
func (e *Engine) execute(ctx context.Context, plan []planned, t *tally) (*model.Batch, []float32, float64, error) {
	if err := e.draft(ctx, plan, t); err != nil {
		e.log.Warn("drafting failed; decoding without drafts", "err", err)
		for _, p := range plan {
			if p.s.spec != nil {
				p.s.spec.drafts = p.s.spec.drafts[:0]
			}
		}
	}
	b := &model.Batch{}
	for i := range plan {
		p := &plan[i]
		s := p.s
		start := s.computed()
		toks := s.tokens[start : start+p.n]
		lg := model.NoLogits
		if start+p.n == len(s.tokens) {
			lg = model.LastLogits
		}
		var draft *cache.Seq
		if st := s.spec; st != nil {
			if st.method == SpecMTP {
				if st.mtp == nil {
					// The draft state records from here on (after a prefix
					// hit or a preemption, from the restored position).
					if d, err := cache.NewSeq(s.cs.Pool(), e.drafter.DraftSpecs()); err == nil {
						st.mtp, st.hidFrom = d, start
						d.Skip(start)
					}
				}
				draft = st.mtp
			}
			if p.k > 0 && len(st.drafts) > 0 {
				toks = append(append([]int32(nil), toks...), st.drafts...)
				lg = model.AllLogits
				var err error
				if st.undo, err = s.cs.Mark(len(toks)); err != nil {
					return b, nil, 0, err
				}
			}
		}
		if s.req.OnLogits != nil {
			lg = model.AllLogits
		}
		b.Spans = append(b.Spans, model.Span{Seq: s.cs, Start: len(b.Tokens), Len: len(toks), Logits: lg, Draft: draft})
		b.Tokens = append(b.Tokens, toks...)
	}
	t0 := time.Now()
	logits, err := e.m.Forward(ctx, b)
	return b, logits, time.Since(t0).Seconds(), err
}

// postprocess turns a forward pass's logits into each request's next
// tokens: callbacks, verification of drafts and rollback, sampling, and
// the events of tokens (pushed at once, but for a request's last, which it
// returns with the requests done). It runs without the engine's lock.
func (e *Engine) postprocess(plan []planned, b *model.Batch, logits []float32, t *tally) (done []finished) {
	V := e.m.VocabSize()
	row := 0
	for i, p := range plan {
		s, span := p.s, b.Spans[i]
		start := s.cs.Len() - span.Len
		var rows []float32
		switch span.Logits {
		case model.AllLogits:
			rows = logits[row*V : (row+span.Len)*V]
			row += span.Len
		case model.LastLogits:
			rows = logits[row*V : (row+1)*V]
			row++
		}
		if st := s.spec; st != nil && st.undo != nil {
			if last, ok := e.verify(s, rows, start, t); ok {
				done = append(done, finished{s, last})
			}
			continue
		}
		if s.req.OnLogits != nil {
			for j := range span.Len {
				s.req.OnLogits(start+j, rows[j*V:(j+1)*V])
			}
		}
		if start < s.prompt {
			t.promptTokens += int64(min(span.Len, s.prompt-start))
		}
		if s.cs.Len() < len(s.tokens) {
			continue // prefill continues next step
		}
		if last, ok := e.emit(s, rows[len(rows)-V:], t); ok {
			done = append(done, finished{s, last})
		}
	}
	return done
}

// verify checks a speculating request's drafts against the target logits
// rows (positions start.., the first for the last committed token, then one
// per draft): drafts are accepted in order by the speculative rule until one
// is rejected, which is replaced by the rule's own token; when all are
// accepted one more token is sampled from the last row. The sequence's state
// is rolled back to the accepted tokens (for recurrent state: to before the
// feed, and the accepted tokens are fed again next step). It returns the
// request's last event when it finished.
func (e *Engine) verify(s *seq, rows []float32, start int, t *tally) (Event, bool) {
	st := s.spec
	V := e.m.VocabSize()
	n := len(st.drafts)
	undo := st.undo
	st.undo = nil
	t.specSteps++
	t.specDrafted += int64(n)
	accepted := 0
	var last Event
	done := false
	for i := 0; i <= n; i++ {
		r := rows[i*V : (i+1)*V]
		if s.req.OnLogits != nil {
			s.req.OnLogits(start+i, r)
		}
		var tok int32
		ok := false
		if i < n {
			tok, ok = s.sampler.verify(r, st.drafts[i], st.q[i])
		} else {
			tok = s.sampler.sample(r)
		}
		if ok {
			accepted++
		}
		if last, done = e.commit(s, tok, r, t); done || !ok {
			break
		}
	}
	t.specAccepted += int64(accepted)
	if n > 0 {
		st.alpha = 0.8*st.alpha + 0.2*float64(accepted)/float64(n)
	}
	if done {
		return last, true
	}
	if accepted < n {
		undo.Rollback(accepted + 1)
	}
	return Event{}, false
}

// emit picks the next token of s from the logits of its last position and
// commits it; it returns the request's last event when it finished.
func (e *Engine) emit(s *seq, logits []float32, t *tally) (Event, bool) {
	out := len(s.tokens) - s.prompt
	var tok int32
	if s.req.Forced != nil && out < len(s.req.Forced) {
		tok = s.req.Forced[out]
	} else {
		var err error
		if tok, err = e.sample(s, logits); err != nil { // constraint.go: masked by the request's constraint
			return Event{Finish: FinishError, Err: err, PromptTokens: s.prompt, OutputTokens: out}, true
		}
	}
	return e.commit(s, tok, logits, t)
}

// commit appends tok to s and sends it, with its log-probability under
// logits when the request asks for it; when the request is done it returns
// the last event instead of sending it (publish sends it once the
// request's pages are released).
func (e *Engine) commit(s *seq, tok int32, logits []float32, t *tally) (Event, bool) {
	out := len(s.tokens) - s.prompt
	ev := Event{Token: tok, PromptTokens: s.prompt, OutputTokens: out + 1, CachedTokens: s.cached}
	if s.req.WantLogprobs {
		ev.Logprob, ev.Top = logprobs(logits, tok, s.req.Logprobs)
	}
	s.sampler.observe(tok)
	s.tokens = append(s.tokens, tok)
	t.outTokens++
	switch {
	case (tok == e.cfg.EOS && !s.req.IgnoreEOS) || slices.Contains(s.req.Stop, tok):
		ev.Finish = FinishStop
	case out+1 >= s.req.MaxTokens:
		ev.Finish = FinishLength
	}
	if ev.Finish != "" {
		return ev, true
	}
	s.stream.push(ev)
	if s.req.Handoff {
		h, err := e.newHandoff(s)
		ev = Event{Finish: FinishHandoff, Handoff: h, Err: err, PromptTokens: s.prompt, OutputTokens: out + 1}
		if err != nil {
			ev.Finish = FinishError
		}
		return ev, true
	}
	return Event{}, false
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

// admit takes the fixed pages of s, restores the longest prefix snapshot of
// its tokens if there is one, and takes the growing pages of the tokens it
// will compute this step (at most budget), all or none. It admits only when
// the pool could hold all of s's tokens so far (evicting snapshots to make
// room), so a request is not admitted to be preempted before its prompt is
// through. It returns the number of tokens to compute.
func (e *Engine) admit(s *seq, budget int) (int, bool) {
	if s.cs != nil {
		// A resumed request: its state came with it (Resume).
		from := s.cs.Len()
		n := min(len(s.tokens)-from, budget)
		if err := s.cs.Reserve(from + n); err != nil {
			return 0, false
		}
		return n, true
	}
	var hit *snapshot
	if e.prefix != nil {
		hit = e.prefix.lookup(s.tokens)
	}
	pool := e.poolFor(hit)
	for ; e.PagesFor(len(s.tokens)) > pool.FreePages(); pool = e.poolFor(hit) {
		switch {
		case e.prefix == nil:
			return 0, false
		case e.evictFor(pool, hit):
		case hit != nil: // the pool cannot hold both: give up the hit
			e.prefix.drop(hit)
			hit = nil
		default:
			return 0, false
		}
	}
	var cs *cache.Seq
	var err error
	if hit != nil {
		cs, err = hit.seq.Fork()
	} else {
		cs, err = e.m.NewSeq(pool)
	}
	if err != nil {
		return 0, false
	}
	from := cs.Len()
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
	if !s.admitted {
		s.admitted, s.cached = true, min(from, s.prompt)
	}
	return n, true
}

// snapshot records s's state in the prefix cache when it sits at an
// aligned position the cache wants: a planned point, or, as it decodes,
// every decodeSnapEvery tokens (kept as its latest decode snapshot), or
// its end when it finishes (final).
func (e *Engine) snapshot(s *seq, final bool) {
	p := e.prefix
	if p == nil || s.cs.Len()%p.align != 0 || s.cs.Len() == 0 {
		return
	}
	if i := slices.Index(s.snapAt, s.cs.Len()); i >= 0 {
		s.snapAt = slices.Delete(s.snapAt, i, i+1)
		p.add(e.m, e.pool, s.cs, s.tokens, nil)
		return
	}
	if s.cs.Len() <= s.prompt || !final && s.cs.Len()%p.decodeSnapEvery() != 0 {
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
