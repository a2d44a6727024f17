package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Sampling says how a request picks each next token. The zero value is greedy.
type Sampling struct {
	// Temperature divides the logits; 0 means greedy (argmax).
	Temperature float64
	// TopK keeps the k most likely tokens (0: all).
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability
	// reaches p (0 or 1: all).
	TopP float64
	// MinP drops tokens less likely than MinP times the most likely one (0: none).
	MinP float64
	// RepetitionPenalty divides positive logits and multiplies negative ones of
	// every token seen in the prompt or the output (1 or 0: none).
	RepetitionPenalty float64
	// PresencePenalty is subtracted once from the logit of every token the
	// output contains; FrequencyPenalty once per occurrence.
	PresencePenalty, FrequencyPenalty float64
	// LogitBias is added to the logits of the tokens it names (after the
	// penalties, before the temperature), as OpenAI's logit_bias: values in
	// [-100, 100], where -100 all but bans a token and 100 all but forces
	// it. Log-probabilities stay those of the model's raw distribution.
	LogitBias map[int32]float32 `json:",omitempty"`
	// Seed makes sampling reproducible: the same request with the same seed
	// gives the same tokens whatever else is in the batch. Zero picks one.
	Seed uint64
}

// MaxLogitBias bounds the magnitude of a LogitBias value.
const MaxLogitBias = 100

// Validate checks the parameters' ranges.
func (s *Sampling) Validate() error {
	switch {
	case s.Temperature < 0 || math.IsNaN(s.Temperature) || math.IsInf(s.Temperature, 0):
		return fmt.Errorf("temperature %g must be finite and >= 0", s.Temperature)
	case s.TopK < 0:
		return fmt.Errorf("top_k %d must be >= 0", s.TopK)
	case s.TopP < 0 || s.TopP > 1 || math.IsNaN(s.TopP):
		return fmt.Errorf("top_p %g must be in [0, 1]", s.TopP)
	case s.MinP < 0 || s.MinP > 1 || math.IsNaN(s.MinP):
		return fmt.Errorf("min_p %g must be in [0, 1]", s.MinP)
	case s.RepetitionPenalty < 0 || math.IsNaN(s.RepetitionPenalty) || math.IsInf(s.RepetitionPenalty, 0):
		return fmt.Errorf("repetition_penalty %g must be finite and >= 0", s.RepetitionPenalty)
	case math.IsNaN(s.PresencePenalty) || math.IsInf(s.PresencePenalty, 0) || math.Abs(s.PresencePenalty) > 2:
		return fmt.Errorf("presence_penalty %g must be in [-2, 2]", s.PresencePenalty)
	case math.IsNaN(s.FrequencyPenalty) || math.IsInf(s.FrequencyPenalty, 0) || math.Abs(s.FrequencyPenalty) > 2:
		return fmt.Errorf("frequency_penalty %g must be in [-2, 2]", s.FrequencyPenalty)
	}
	for t, b := range s.LogitBias {
		if !(math.Abs(float64(b)) <= MaxLogitBias) {
			return fmt.Errorf("logit_bias of token %d is %g; it must be in [-%d, %d]", t, b, MaxLogitBias, MaxLogitBias)
		}
	}
	return nil
}

// sampler is one request's sampling state: its random stream and the counts
// the penalties need. It depends only on the request's own logits and
// tokens, never on the batch.
type sampler struct {
	p      Sampling
	rng    *rand.Rand
	src    *rand.PCG      // rng's source, whose state hand-off carries
	seen   map[int32]bool // prompt and output tokens (repetition penalty)
	counts map[int32]int  // output tokens (presence and frequency penalties)
	// out counts generated tokens; until it reaches minOut the held tokens
	// (EOS and stop tokens, under Request.MinTokens) cannot be drawn.
	out, minOut int
	held        []int32
	buf         []float32 // scratch: processed logits
	idx         []int32   // scratch: candidate order
	mask        []uint64  // allowed tokens of a constrained request (constraint.go); nil: all
}

func newSampler(p Sampling, prompt []int32) *sampler {
	src := rand.NewPCG(p.Seed, p.Seed^0xda942042e4dd58b5)
	s := &sampler{p: p, rng: rand.New(src), src: src, seen: map[int32]bool{}, counts: map[int32]int{}}
	for _, t := range prompt {
		s.seen[t] = true
	}
	return s
}

// observe records a generated token.
func (s *sampler) observe(t int32) {
	s.seen[t] = true
	s.counts[t]++
	s.out++
}

// hold keeps the tokens ids from being drawn until n tokens have been
// generated (Request.MinTokens).
func (s *sampler) hold(n int, ids []int32) {
	s.minOut, s.held = n, ids
}

// dist is a sampling distribution over candidate tokens, most likely first.
type dist struct {
	idx []int32
	p   []float64 // sums to 1
}

// prob is the probability of token t under d.
func (d dist) prob(t int32) float64 {
	for i, x := range d.idx {
		if x == t {
			return d.p[i]
		}
	}
	return 0
}

// penalized returns the logits with the request's penalties and logit
// biases applied, and the held tokens at -Inf while they are held.
func (s *sampler) penalized(logits []float32) []float32 {
	p := &s.p
	x := append(s.buf[:0], logits...)
	s.buf = x
	if s.mask != nil {
		applyMask(x, s.mask) // constraint.go: disallowed tokens get -Inf
	}
	if rp := float32(p.RepetitionPenalty); rp > 0 && rp != 1 {
		for t := range s.seen {
			if x[t] > 0 {
				x[t] /= rp
			} else {
				x[t] *= rp
			}
		}
	}
	if p.PresencePenalty != 0 || p.FrequencyPenalty != 0 {
		for t, c := range s.counts {
			x[t] -= float32(p.PresencePenalty) + float32(p.FrequencyPenalty)*float32(c)
		}
	}
	for t, b := range p.LogitBias {
		x[t] += b
	}
	if s.out < s.minOut {
		for _, t := range s.held {
			x[t] = float32(math.Inf(-1))
		}
	}
	return x
}

// distribution is what sample draws from: the penalized logits, then for
// temperature 0 the argmax alone, else divided by the temperature, cut by
// top-k, softmax, cut by top-p and min-p, renormalized.
func (s *sampler) distribution(logits []float32) dist {
	p := &s.p
	x := s.penalized(logits)
	if p.Temperature == 0 {
		return dist{idx: []int32{argmax(x)}, p: []float64{1}}
	}
	inv := float32(1 / p.Temperature)
	for i := range x {
		x[i] *= inv
	}
	// Candidates by decreasing logit; ties by token id, so the order is a
	// function of the logits alone.
	idx := s.idx[:0]
	for i := range x {
		idx = append(idx, int32(i))
	}
	k := len(idx)
	if p.TopK > 0 && p.TopK < k {
		k = p.TopK
	}
	slices.SortFunc(idx, func(a, b int32) int {
		if x[a] != x[b] {
			if x[a] > x[b] {
				return -1
			}
			return 1
		}
		return int(a - b)
	})
	s.idx = idx
	idx = slices.Clone(idx[:k])
	// Softmax over the candidates in float64.
	mx := float64(x[idx[0]])
	probs := make([]float64, k)
	var sum float64
	for i, t := range idx {
		probs[i] = math.Exp(float64(x[t]) - mx)
		sum += probs[i]
	}
	for i := range probs {
		probs[i] /= sum
	}
	n := k
	if p.TopP > 0 && p.TopP < 1 {
		var c float64
		for i, q := range probs {
			c += q
			if c >= p.TopP {
				n = i + 1
				break
			}
		}
	}
	if p.MinP > 0 {
		floor := p.MinP * probs[0]
		for i := 1; i < n; i++ {
			if probs[i] < floor {
				n = i
				break
			}
		}
	}
	for n > 1 && probs[n-1] == 0 {
		n-- // never drawn (masked out, or underflowed): not even by rounding
	}
	var total float64
	for _, q := range probs[:n] {
		total += q
	}
	for i := range probs[:n] {
		probs[i] /= total
	}
	return dist{idx: idx[:n], p: probs[:n]}
}

// draw picks a token from d with one random number (none when d has one token).
func (s *sampler) draw(d dist) int32 {
	if len(d.idx) == 1 {
		return d.idx[0]
	}
	u := s.rng.Float64()
	last := 0 // the last candidate that can be drawn, for rounding at the end
	for i, q := range d.p {
		u -= q
		if u < 0 {
			return d.idx[i]
		}
		if q > 0 {
			last = i
		}
	}
	return d.idx[last]
}

// sample picks the next token from one row of logits. It draws exactly one
// random number per call when sampling (none when greedy), so a request's
// random stream advances the same way whatever the batch.
func (s *sampler) sample(logits []float32) int32 {
	return s.draw(s.distribution(logits))
}

// verify applies the speculative-sampling rule to a drafted token d, drawn
// from the draft distribution q, against the target logits: d is accepted
// with probability min(1, p(d)/q(d)); otherwise the token is drawn from
// max(0, p-q) renormalized. The accepted or drawn token is returned. Tokens
// so produced are distributed exactly as sample(target) would be. Greedy
// requests accept d exactly when it is the target's argmax.
func (s *sampler) verify(target []float32, d int32, q dist) (int32, bool) {
	p := s.distribution(target)
	if s.p.Temperature == 0 {
		return p.idx[0], p.idx[0] == d
	}
	pd, qd := p.prob(d), q.prob(d)
	if qd > 0 && s.rng.Float64() < min(1, pd/qd) {
		return d, true
	}
	var rest dist
	var total float64
	for i, t := range p.idx {
		if r := p.p[i] - q.prob(t); r > 0 {
			rest.idx = append(rest.idx, t)
			rest.p = append(rest.p, r)
			total += r
		}
	}
	if total == 0 {
		return s.draw(p), false
	}
	for i := range rest.p {
		rest.p[i] /= total
	}
	return s.draw(rest), false
}

func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

// logprobs returns log-softmax(logits)[tok] and, when n > 0, the n most
// likely tokens with their log-probabilities (the model's raw distribution).
func logprobs(logits []float32, tok int32, n int) (float32, []TokenLogprob) {
	mx := float64(logits[argmax(logits)])
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - mx)
	}
	lse := mx + math.Log(sum)
	lp := float32(float64(logits[tok]) - lse)
	if n <= 0 {
		return lp, nil
	}
	n = min(n, len(logits))
	top := make([]TokenLogprob, 0, n+1)
	for i, v := range logits {
		if len(top) < n || v > top[len(top)-1].Logprob {
			e := TokenLogprob{Token: int32(i), Logprob: v}
			j, _ := slices.BinarySearchFunc(top, e, func(a, b TokenLogprob) int {
				if a.Logprob > b.Logprob {
					return -1
				}
				if a.Logprob < b.Logprob {
					return 1
				}
				return 0
			})
			// Equal logits keep ascending token order: insert after equals.
			for j < len(top) && top[j].Logprob == v {
				j++
			}
			top = slices.Insert(top, j, e)
			if len(top) > n {
				top = top[:n]
			}
		}
	}
	for i := range top {
		top[i].Logprob = float32(float64(top[i].Logprob) - lse)
	}
	return lp, top
}
