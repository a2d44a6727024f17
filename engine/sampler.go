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
// top-k, softmax, cut by top-p and min-p, renormalized. It selects the
// candidates it needs without sorting the vocabulary: the top k by a heap
// of k, the top-p nucleus by popping a heap of all until the mass is
// reached, the min-p survivors by one filtering pass; with no cut at all the
// candidates stay in token order. Ties rank the lower token id first, so
// the result is a function of the logits alone.
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
	V := len(x)
	topP := p.TopP > 0 && p.TopP < 1
	var idx []int32
	var probs []float64
	switch {
	case p.TopK > 0 && p.TopK < V:
		idx = topIndices(x, p.TopK)
		probs = softmaxOf(x, idx)
	default:
		// Softmax over the whole vocabulary, in token order.
		mx := float64(x[argmax(x)])
		var sum float64
		for _, v := range x {
			sum += math.Exp(float64(v) - mx)
		}
		prob := func(t int32) float64 { return math.Exp(float64(x[t])-mx) / sum }
		switch {
		case topP:
			// Pop candidates best first until their mass reaches top-p.
			h := rankHeap{x: x, idx: s.idx[:0]}
			for i := range V {
				h.idx = append(h.idx, int32(i))
			}
			h.init()
			var c float64
			for len(h.idx) > 0 && (len(idx) == 0 || c < p.TopP) {
				t := h.pop()
				q := prob(t)
				idx, probs = append(idx, t), append(probs, q)
				c += q
			}
			s.idx = h.idx[:0]
		case p.MinP > 0:
			floor := p.MinP * prob(argmax(x))
			for i := range V {
				if prob(int32(i)) >= floor {
					idx = append(idx, int32(i))
				}
			}
			sortRanked(x, idx)
			for _, t := range idx {
				probs = append(probs, prob(t))
			}
		default:
			idx, probs = make([]int32, V), make([]float64, V)
			for i := range V {
				idx[i], probs[i] = int32(i), prob(int32(i))
			}
		}
	}
	n := len(idx)
	if topP && p.TopK > 0 && p.TopK < V {
		var c float64
		for i, q := range probs {
			c += q
			if c >= p.TopP {
				n = i + 1
				break
			}
		}
	}
	if p.MinP > 0 && (topP || p.TopK > 0 && p.TopK < V) {
		// (Without top-k or top-p the filter above has applied it.)
		floor := p.MinP * probs[0]
		for i := 1; i < n; i++ {
			if probs[i] < floor {
				n = i
				break
			}
		}
	}
	for n > 1 && probs[n-1] == 0 && (topP || p.MinP > 0 || p.TopK > 0 && p.TopK < V) {
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

// topIndices returns the k best-ranked indices of x, best first.
func topIndices(x []float32, k int) []int32 {
	h := rankHeap{x: x, idx: make([]int32, 0, k), worstFirst: true}
	for i := range len(x) {
		t := int32(i)
		if len(h.idx) < k {
			h.push(t)
		} else if h.before(t, h.idx[0]) {
			h.idx[0] = t
			h.down(0)
		}
	}
	sortRanked(x, h.idx)
	return h.idx
}

// softmaxOf is the softmax of x over the candidates idx (best first), in float64.
func softmaxOf(x []float32, idx []int32) []float64 {
	mx := float64(x[idx[0]])
	probs := make([]float64, len(idx))
	var sum float64
	for i, t := range idx {
		probs[i] = math.Exp(float64(x[t]) - mx)
		sum += probs[i]
	}
	for i := range probs {
		probs[i] /= sum
	}
	return probs
}

// sortRanked sorts idx by decreasing x, ties by index.
func sortRanked(x []float32, idx []int32) {
	slices.SortFunc(idx, func(a, b int32) int {
		if x[a] != x[b] {
			if x[a] > x[b] {
				return -1
			}
			return 1
		}
		return int(a - b)
	})
}

// rankHeap is a binary heap of indices into x ordered by rank (larger
// value first, ties to the lower index): best at the root, or with
// worstFirst the worst at the root (for keeping the k best).
type rankHeap struct {
	x          []float32
	idx        []int32
	worstFirst bool
}

// before reports whether a ranks before b.
func (h *rankHeap) before(a, b int32) bool {
	if h.x[a] != h.x[b] {
		return h.x[a] > h.x[b]
	}
	return a < b
}

// above reports whether a belongs nearer the root than b.
func (h *rankHeap) above(a, b int32) bool {
	if h.worstFirst {
		return h.before(b, a)
	}
	return h.before(a, b)
}

func (h *rankHeap) init() {
	for i := len(h.idx)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *rankHeap) push(t int32) {
	h.idx = append(h.idx, t)
	for i := len(h.idx) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.above(h.idx[i], h.idx[p]) {
			break
		}
		h.idx[i], h.idx[p] = h.idx[p], h.idx[i]
		i = p
	}
}

func (h *rankHeap) pop() int32 {
	t := h.idx[0]
	last := len(h.idx) - 1
	h.idx[0] = h.idx[last]
	h.idx = h.idx[:last]
	if last > 0 {
		h.down(0)
	}
	return t
}

func (h *rankHeap) down(i int) {
	n := len(h.idx)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if r := c + 1; r < n && h.above(h.idx[r], h.idx[c]) {
			c = r
		}
		if !h.above(h.idx[c], h.idx[i]) {
			return
		}
		h.idx[i], h.idx[c] = h.idx[c], h.idx[i]
		i = c
	}
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
