package engine

import (
	"fmt"
	"math"
	bits64 "math/bits"
	"slices"
)

// Constraint restricts what a request may generate to the outputs of a
// formal language: structured output (JSON, a JSON schema) or a forced
// tool call. Before each token the engine asks which tokens may come next
// and masks the others out of the logits (greedy and sampled alike), then
// tells the constraint the token it chose.
//
// The engine calls a request's constraint from one goroutine, never
// concurrently, in this order: Allowed and Complete, then Accept with the
// chosen token unless it ends the request. A constraint belongs to one
// request.
//
// The end of the output is the constraint's to decide: the request's EOS
// and stop tokens are allowed exactly when Complete reports true (whatever
// the mask says of them), and IgnoreEOS has no effect. Once Complete and
// with no token allowed, only EOS or a stop token may follow.
// Log-probabilities are the model's own, before the mask. Constrained
// requests do not speculate (drafts would have to be checked against the
// constraint token by token, and it would have to roll back), cannot be
// teacher-forced and cannot be handed off.
type Constraint interface {
	// Allowed sets mask to the tokens that may come next: bit t%64 of
	// word t/64 for token t, len(mask) = (vocabulary size + 63) / 64.
	Allowed(mask []uint64)
	// Accept advances past tok, which the last Allowed allowed. An error
	// ends the request with FinishError.
	Accept(tok int32) error
	// Complete reports whether the output so far is a whole output of
	// the language, so that the request may end here.
	Complete() bool
}

// checkConstraint prepares a constrained request in Submit.
func checkConstraint(r *Request) error {
	if r.Constraint == nil {
		return nil
	}
	switch {
	case r.Forced != nil:
		return fmt.Errorf("engine: a request cannot be both teacher-forced and constrained")
	case r.Handoff:
		return fmt.Errorf("engine: a constrained request cannot be handed off (its constraint's state does not travel)")
	}
	r.Speculation = &Speculation{Method: SpecOff}
	r.IgnoreEOS = false
	// The grammar decides where the output ends: holding EOS back for
	// MinTokens could leave no token a complete grammar allows.
	r.MinTokens = 0
	return nil
}

// sample picks the next token of s from logits: plainly, or, when the
// request has a constraint, among the tokens it allows, which it then
// accepts. An error (the constraint allows nothing, or refuses the token)
// must end the request with FinishError; sample itself changes nothing
// but the request's sampler and constraint, so it may run outside the
// engine's lock.
func (e *Engine) sample(s *seq, logits []float32) (int32, error) {
	c := s.req.Constraint
	if c == nil {
		return s.sampler.sample(logits), nil
	}
	words := (len(logits) + 63) / 64
	if len(s.sampler.mask) != words {
		s.sampler.mask = make([]uint64, words)
	}
	mask := s.sampler.mask
	c.Allowed(mask)
	complete := c.Complete()
	ends := append(s.req.Stop[:len(s.req.Stop):len(s.req.Stop)], e.cfg.EOS)
	for _, t := range ends {
		if t < 0 || int(t) >= len(logits) {
			continue
		}
		if complete {
			mask[t>>6] |= 1 << (t & 63)
		} else {
			mask[t>>6] &^= 1 << (t & 63)
		}
	}
	if !slices.ContainsFunc(mask, func(w uint64) bool { return w != 0 }) {
		return -1, fmt.Errorf("engine: the request's constraint allows no token after %d generated", len(s.tokens)-s.prompt)
	}
	tok := s.sampler.sample(logits)
	if complete && slices.Contains(ends, tok) {
		return tok, nil
	}
	if err := c.Accept(tok); err != nil {
		return -1, fmt.Errorf("engine: constraint: %w", err)
	}
	return tok, nil
}

// applyMask sets the logits of the tokens mask leaves out to -Inf. Most
// constrained steps allow few tokens: then the row is filled at memory
// speed and the allowed logits put back; otherwise the left-out ones are
// set one by one.
func applyMask(x []float32, mask []uint64) {
	neg := float32(math.Inf(-1))
	words := min(len(mask), (len(x)+63)/64)
	allowed := 0
	for _, w := range mask[:words] {
		allowed += bits64.OnesCount64(w)
	}
	if allowed < len(x)/4 {
		kept := make([]float32, 0, allowed)
		for w, b := range mask[:words] {
			for ; b != 0; b &= b - 1 {
				kept = append(kept, x[w*64+bits64.TrailingZeros64(b)])
			}
		}
		x[0] = neg
		for n := 1; n < len(x); n *= 2 {
			copy(x[n:], x[:n])
		}
		k := 0
		for w, b := range mask[:words] {
			for ; b != 0; b &= b - 1 {
				x[w*64+bits64.TrailingZeros64(b)] = kept[k]
				k++
			}
		}
		return
	}
	for w, b := range mask[:words] {
		base := w * 64
		row := x[base:min(base+64, len(x))]
		if b == ^uint64(0) {
			continue
		}
		for out := ^b; out != 0; out &= out - 1 {
			if i := bits64.TrailingZeros64(out); i < len(row) {
				row[i] = neg
			}
		}
	}
	for i := words * 64; i < len(x); i++ {
		x[i] = neg
	}
}
