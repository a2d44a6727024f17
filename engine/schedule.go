package engine

import (
	"math"
	"slices"
	"time"
)

// schedule picks this step's work by the engine's policy.
func (e *Engine) schedule() []planned {
	if e.cfg.StepTarget > 0 {
		return e.scheduleFair()
	}
	return e.scheduleFIFO()
}

// scheduleFIFO picks this step's work first come, first served. Running sequences go first, in arrival
// order (decodes and continuing prefills alike); waiting ones are admitted
// in arrival order while the token budget, the sequence limit and the pool
// allow, and never past one that does not fit, so none starves. When a
// running sequence cannot get the pages for its tokens, the latest-arriving
// running sequence is preempted (its pages freed, to be recomputed later)
// until it can.
func (e *Engine) scheduleFIFO() []planned {
	budget := e.cfg.MaxBatchTokens
	var plan []planned
	for i := 0; i < len(e.running) && budget > 0 && len(plan) < e.cfg.MaxSeqs; i++ {
		s := e.running[i]
		n := s.chunk(s.computed(), min(len(s.tokens)-s.computed(), budget))
		k := 0
		if s.computed() == len(s.tokens)-1 { // a decode: maybe speculate
			k = e.draftLen(s, budget-n, e.cfg.MaxBatchTokens-budget, len(plan))
		}
		for s.cs.Reserve(s.cs.Len()+n+k) != nil {
			if e.evictFor(s.cs.Pool(), nil) {
				continue
			}
			victim := e.victimFor(s, nil)
			e.preempt(victim)
			if victim == s {
				break
			}
		}
		if s.cs == nil {
			break // s itself was preempted: everything after it is too
		}
		plan = append(plan, planned{s, n, k})
		budget -= n + k
	}
	for len(e.waiting) > 0 && budget > 0 && len(plan) < e.cfg.MaxSeqs {
		s := e.waiting[0]
		n, ok := e.admit(s, budget)
		if !ok {
			break
		}
		e.waiting = e.waiting[1:]
		e.running = append(e.running, s)
		plan = append(plan, planned{s: s, n: n})
		budget -= n
	}
	return plan
}

// minPrefillChunk is the fewest prompt tokens a step gives a prefilling
// request when it gives it any, so that prompts progress however tight the
// step-time target.
const minPrefillChunk = 16

// scheduleFair picks this step's work so that decoding keeps its pace
// while prompts prefill, and a short prompt is not queued behind a long
// one:
//
//   - decodes first: every running request that is decoding gets its token
//     (and drafts), in arrival order;
//   - the prompt tokens of the step are what the step-cost model says fits
//     in Config.StepTarget beside those decodes (at least minPrefillChunk
//     for each prompt, at most MaxBatchTokens in all);
//   - those tokens are shared between every request still prefilling, the
//     running ones and the waiting ones admitted now (in arrival order,
//     never past one that does not fit): each gets an equal share, and
//     what some leave unused goes to the others, oldest first.
//
// A running request that cannot get its pages preempts the latest-arriving
// request not yet planned (recomputed later); a decode may preempt any.
func (e *Engine) scheduleFair() []planned {
	maxT := e.cfg.MaxBatchTokens
	var plan []planned
	used := 0
	planned_ := func(s *seq) bool { return slices.ContainsFunc(plan, func(p planned) bool { return p.s == s }) }
	// reserve makes room for n+k tokens of s, preempting the latest-arriving
	// running request that is not planned; false if s itself went.
	reserve := func(s *seq, n, k int) bool {
		for s.cs.Reserve(s.cs.Len()+n+k) != nil {
			if e.evictFor(s.cs.Pool(), nil) {
				continue
			}
			v := e.victimFor(s, planned_)
			if v == nil {
				return false
			}
			e.preempt(v)
			if v == s {
				return false
			}
		}
		return true
	}
	// Decodes.
	for i := 0; i < len(e.running) && len(plan) < e.cfg.MaxSeqs && used < maxT; i++ {
		s := e.running[i]
		if s.cs == nil || s.computed() != len(s.tokens)-1 {
			continue
		}
		k := e.draftLen(s, maxT-used-1, used, len(plan))
		if !reserve(s, 1, k) {
			i--
			continue // s was preempted; the list moved under us
		}
		plan = append(plan, planned{s, 1, k})
		used += 1 + k
	}
	var pre []*seq
	for _, s := range e.running {
		if s.cs != nil && s.computed() < len(s.tokens)-1 && !planned_(s) {
			pre = append(pre, s)
		}
	}
	// Equal shares over the running prefills and the waiting requests that
	// may be admitted, unused shares going to the oldest; the prompt
	// tokens are what fits the step-time target, but at least the
	// minimum chunk for each.
	slots := min(len(pre)+len(e.waiting), e.cfg.MaxSeqs-len(plan))
	if slots <= 0 {
		return plan
	}
	budget := min(maxT-used, max(minPrefillChunk*slots, e.tokensFor(e.cfg.StepTarget)-used))
	if budget <= 0 {
		return plan
	}
	share := max(1, budget/slots)
	for _, s := range pre {
		if budget <= 0 || len(plan) >= e.cfg.MaxSeqs {
			break
		}
		if s.cs == nil {
			continue // preempted to make room for another
		}
		n := s.chunk(s.computed(), min(len(s.tokens)-s.computed(), share, budget))
		if !reserve(s, n, 0) {
			continue
		}
		plan = append(plan, planned{s: s, n: n})
		budget -= n
	}
	for len(e.waiting) > 0 && budget > 0 && len(plan) < e.cfg.MaxSeqs {
		s := e.waiting[0]
		n, ok := e.admit(s, min(share, budget))
		if !ok {
			break
		}
		e.waiting = e.waiting[1:]
		e.running = append(e.running, s)
		plan = append(plan, planned{s: s, n: n})
		budget -= n
	}
	// What is left goes to the oldest prefills, in arrival order.
	for i := range plan {
		if budget <= 0 {
			break
		}
		p := &plan[i]
		s := p.s
		left := len(s.tokens) - s.computed() - p.n
		if s.computed() == len(s.tokens)-1 || left <= 0 {
			continue // a decode, or a prompt this step finishes
		}
		more := s.chunk(s.computed(), p.n+min(left, budget)) - p.n // not past a snapshot point
		if more <= 0 || s.cs.Reserve(s.cs.Len()+p.n+more) != nil {
			continue
		}
		p.n += more
		budget -= more
	}
	return plan
}

// tokensFor is how many tokens the step-cost model says a forward pass
// can hold in d (MaxBatchTokens before it has measured anything).
func (e *Engine) tokensFor(d time.Duration) int {
	a, b := e.cost.line()
	if b <= 0 {
		return e.cfg.MaxBatchTokens
	}
	n := (d.Seconds() - a) / b
	if n > float64(e.cfg.MaxBatchTokens) || math.IsNaN(n) {
		return e.cfg.MaxBatchTokens
	}
	return max(int(n), 1)
}
