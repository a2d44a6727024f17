package engine

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/model"
)

// Speculation configures speculative decoding: a drafter proposes tokens,
// the target model verifies them all in one forward pass, and the sequence
// state is rolled back past the first rejected one. Greedy output is
// identical to plain decoding; sampled output follows the speculative
// rejection rule, so its distribution is unchanged.
type Speculation struct {
	// Method is SpecMTP (the checkpoint's multi-token-prediction layer),
	// SpecNgram (prompt lookup: the continuation of the latest earlier
	// occurrence of the last few tokens), or "" / SpecOff.
	Method string
	// MaxDraft bounds the tokens drafted per step (default 4). The number
	// drafted adapts to the request's acceptance rate and the batch load.
	MaxDraft int
	// Fixed drafts MaxDraft tokens every step instead of adapting (for
	// measuring acceptance, and for tests that must exercise verification).
	Fixed bool `json:",omitempty"`
}

// Speculation methods.
const (
	SpecOff   = "off"
	SpecMTP   = "mtp"
	SpecNgram = "ngram"
)

// specState is one request's speculative decoding state.
type specState struct {
	method   string
	maxDraft int
	alpha    float64 // running fraction of drafted tokens accepted
	skipped  int     // steps since the last draft
	fixed    bool    // draft maxDraft every step
	// MTP: the draft state (the MTP layer's cache and the hidden states it
	// reads), recording since position hidFrom.
	mtp     *cache.Seq
	hidFrom int
	// This step's drafts and the distributions they were drawn from.
	drafts []int32
	q      []dist
	undo   *cache.Undo // the main sequence's mark for this step's verification
}

func (st *specState) reset() {
	if st.mtp != nil {
		st.mtp.Release()
		st.mtp = nil
	}
	st.hidFrom = 0
	st.drafts, st.q, st.undo = st.drafts[:0], st.q[:0], nil
}

// resolveSpec picks a request's speculation settings: its own, else the
// engine's default. It fails for MTP on a model without MTP layers.
func (e *Engine) resolveSpec(r *Request) (*specState, error) {
	sp := e.cfg.Speculation
	if r.Speculation != nil {
		sp = *r.Speculation
	}
	switch sp.Method {
	case "", SpecOff:
		return nil, nil
	case SpecNgram:
	case SpecMTP:
		if e.drafter == nil {
			return nil, fmt.Errorf("engine: speculation method mtp: the model has no draft head")
		}
	default:
		return nil, fmt.Errorf("engine: unknown speculation method %q (want mtp, ngram or off)", sp.Method)
	}
	if r.Forced != nil || e.maxRing < 2 {
		return nil, nil // teacher forcing decides every token itself
	}
	if sp.MaxDraft <= 0 {
		sp.MaxDraft = 4
	}
	if sp.MaxDraft > 16 {
		return nil, fmt.Errorf("engine: max draft %d is more than 16", sp.MaxDraft)
	}
	return &specState{method: sp.Method, maxDraft: min(sp.MaxDraft, e.maxRing-1), alpha: 0.6, fixed: sp.Fixed}, nil
}

// minRing is the smallest ring among the kinds of main and draft states:
// a verification feed may not be longer.
func minRing(m model.Model, d model.Drafter) int {
	r := math.MaxInt
	specs := m.CacheSpecs()
	if d != nil {
		specs = append(specs, d.DraftSpecs()...)
	}
	for _, s := range specs {
		if s.Kind() == cache.Ring {
			r = min(r, s.FixedSlots)
		}
	}
	return r
}

// costModel estimates the time of a step from what steps took: a forward
// pass of T tokens takes about a + b·T seconds (a least-squares line over
// recent steps, older ones weighing less), and one MTP drafting pass takes
// about draft seconds.
type costModel struct {
	sw, sx, sy, sxx, sxy float64
	draft                float64
}

func (c *costModel) observe(T int, dt float64) {
	const keep = 0.97
	x := float64(T)
	c.sw = c.sw*keep + 1
	c.sx = c.sx*keep + x
	c.sy = c.sy*keep + dt
	c.sxx = c.sxx*keep + x*x
	c.sxy = c.sxy*keep + x*dt
}

func (c *costModel) observeDraft(dt float64) {
	if c.draft == 0 {
		c.draft = dt
	}
	c.draft = 0.9*c.draft + 0.1*dt
}

// line returns a and b; with too little spread in T to fit a slope, all of
// the time is put on the tokens (b = mean time / mean T), which errs
// towards drafting less.
func (c *costModel) line() (a, b float64) {
	if c.sw == 0 {
		return 0, 0
	}
	mx, my := c.sx/c.sw, c.sy/c.sw
	v := c.sxx/c.sw - mx*mx
	if v < 0.25 {
		return 0, my / max(mx, 1)
	}
	b = (c.sxy/c.sw - mx*my) / v
	b = max(b, 0)
	return max(my-b*mx, 0), b
}

// draftLen is how many tokens to draft for s this step. Drafting k tokens
// is expected to yield E(k) = 1+a+...+a^k tokens instead of 1 (a: the
// request's acceptance rate) and makes the step longer by the verification
// of k more tokens and, for MTP, k drafting passes. k is chosen to maximize
// the step's tokens per second: (n-1+E(k)) / (t + cost(k)), where the step
// so far yields n tokens in t seconds; 0 when no k beats not drafting. So
// drafting stops when the batch is large enough that verifying costs more
// than it saves, or when drafts are rarely accepted.
func (e *Engine) draftLen(s *seq, budget, used, decodes int) int {
	st := s.spec
	if st == nil {
		return 0
	}
	kmax := min(st.maxDraft, budget, s.req.MaxTokens-(len(s.tokens)-s.prompt)-1)
	if kmax <= 0 || st.fixed {
		return max(kmax, 0)
	}
	a, b := e.cost.line()
	n := float64(decodes + 1)
	t := a + b*float64(used+1)
	perDraft := b
	if st.method == SpecMTP {
		perDraft += e.cost.draft
	}
	choose := func(alpha float64) int {
		best, bestV := 0, n/max(t, 1e-9)
		exp, term := 1.0, 1.0
		for k := 1; k <= kmax; k++ {
			term *= alpha
			exp += term
			if v := (n - 1 + exp) / max(t+perDraft*float64(k), 1e-9); v > bestV {
				best, bestV = k, v
			}
		}
		return best
	}
	if best := choose(min(max(st.alpha, 0.02), 0.95)); best > 0 {
		st.skipped = 0
		return best
	}
	// Probe now and then, so that a rate that has fallen can recover; but
	// only if drafting could pay at a high acceptance rate.
	if choose(0.9) == 0 {
		return 0
	}
	if st.skipped++; st.skipped >= 16 {
		st.skipped = 0
		return 1
	}
	return 0
}

// ngramDraft proposes up to k tokens: after the latest earlier occurrence
// of the last n tokens (n = 3, 2, 1, longest first), what followed it.
func ngramDraft(toks []int32, k int) []int32 {
	L := len(toks)
	for n := min(3, L-1); n >= 1; n-- {
		suffix := toks[L-n:]
		for start := L - n - 1; start >= 0; start-- {
			match := true
			for i := range n {
				if toks[start+i] != suffix[i] {
					match = false
					break
				}
			}
			if match {
				end := min(start+n+k, L)
				if end > start+n {
					return append([]int32(nil), toks[start+n:end]...)
				}
			}
		}
	}
	return nil
}

// draft fills in the drafts of every planned decode that speculates:
// n-gram lookups, and for MTP requests one batched catch-up pass of the MTP
// layer over the positions whose true hidden state it has not seen (the
// last of which drafts the first token), then one batched pass per further
// draft, each feeding the previous draft and the MTP layer's own output
// state; those passes are rolled back afterwards.
func (e *Engine) draft(ctx context.Context, plan []planned, tl *tally) error {
	var mtp []*planned
	for i := range plan {
		p := &plan[i]
		if p.k == 0 {
			continue
		}
		st := p.s.spec
		st.drafts, st.q = st.drafts[:0], st.q[:0]
		switch st.method {
		case SpecNgram:
			for _, t := range ngramDraft(p.s.tokens, p.k) {
				st.drafts = append(st.drafts, t)
				st.q = append(st.q, dist{idx: []int32{t}, p: []float64{1}})
			}
		case SpecMTP:
			mtp = append(mtp, p)
		}
	}
	if len(mtp) == 0 {
		return nil
	}
	d := e.drafter
	W := d.DraftWindow()
	// Catch up: MTP position t reads the main model's state at t and the
	// token at t+1; the last position with both is L-2.
	b := &model.Batch{}
	var live []*planned
	for _, p := range mtp {
		st := p.s.spec
		last := len(p.s.tokens) - 2
		if st.mtp == nil {
			continue // no room for the draft state: decode plainly
		}
		// Only the last W positions matter: the MTP layer is one window
		// block, whose kv for a position depends on that position alone.
		from := max(st.mtp.Len(), last-W+1, st.hidFrom)
		if from > last {
			continue
		}
		st.mtp.Skip(from - st.mtp.Len())
		b.Spans = append(b.Spans, model.Span{Seq: st.mtp, Start: len(b.Tokens), Len: last - from + 1, Logits: model.LastLogits})
		b.Tokens = append(b.Tokens, p.s.tokens[from+1:last+2]...)
		live = append(live, p)
	}
	if len(live) == 0 {
		return nil
	}
	t0 := time.Now()
	logits, err := d.Draft(ctx, b)
	if err != nil {
		return err
	}
	tl.draftSeconds = append(tl.draftSeconds, time.Since(t0).Seconds())
	V := e.m.VocabSize()
	undos := make([]*cache.Undo, len(live))
	for step := 0; ; step++ {
		// Take one draft per live request from this pass's logits.
		var next []*planned
		nb := &model.Batch{}
		for i, p := range live {
			st := p.s.spec
			q := p.s.sampler.distribution(logits[i*V : (i+1)*V])
			t := p.s.sampler.draw(q)
			st.drafts = append(st.drafts, t)
			st.q = append(st.q, q)
			if len(st.drafts) >= p.k {
				continue
			}
			if step == 0 {
				if undos[i], err = st.mtp.Mark(p.k - 1); err != nil {
					return err
				}
			}
			nb.Spans = append(nb.Spans, model.Span{Seq: st.mtp, Start: len(nb.Tokens), Len: 1, Logits: model.LastLogits})
			nb.Tokens = append(nb.Tokens, t)
			next = append(next, p)
		}
		if len(next) == 0 {
			break
		}
		// Keep undos aligned with the next pass's requests.
		var nu []*cache.Undo
		for i, p := range live {
			if len(p.s.spec.drafts) < p.k {
				nu = append(nu, undos[i])
			} else if undos[i] != nil {
				undos[i].Rollback(0)
			}
		}
		t0 := time.Now()
		if logits, err = d.Draft(ctx, nb); err != nil {
			return err
		}
		tl.draftSeconds = append(tl.draftSeconds, time.Since(t0).Seconds())
		live, undos = next, nu
	}
	for _, u := range undos {
		if u != nil {
			u.Rollback(0)
		}
	}
	return nil
}
