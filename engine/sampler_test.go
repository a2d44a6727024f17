package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func draw(s *sampler, logits []float32, n int) []int {
	counts := make([]int, len(logits))
	for range n {
		counts[s.sample(logits)]++
	}
	return counts
}

func TestSamplerFilters(t *testing.T) {
	ln := func(x float64) float32 { return float32(math.Log(x)) }
	// Probabilities 0.5, 0.3, 0.2 at temperature 1.
	logits := []float32{ln(0.5), ln(0.3), ln(0.2)}
	tests := []struct {
		name    string
		p       Sampling
		allowed []bool
	}{
		{"greedy", Sampling{}, []bool{true, false, false}},
		{"top-k 1", Sampling{Temperature: 1, TopK: 1}, []bool{true, false, false}},
		{"top-k 2", Sampling{Temperature: 1, TopK: 2}, []bool{true, true, false}},
		{"top-p 0.5", Sampling{Temperature: 1, TopP: 0.5}, []bool{true, false, false}},
		{"top-p 0.8", Sampling{Temperature: 1, TopP: 0.79}, []bool{true, true, false}},
		{"min-p 0.5", Sampling{Temperature: 1, MinP: 0.5}, []bool{true, true, false}},
		{"min-p 0.7", Sampling{Temperature: 1, MinP: 0.7}, []bool{true, false, false}},
		{"all", Sampling{Temperature: 1}, []bool{true, true, true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.p.Seed = 3
			counts := draw(newSampler(tc.p, nil), logits, 3000)
			for i, c := range counts {
				if (c > 0) != tc.allowed[i] {
					t.Errorf("token %d drawn %d times; allowed %v", i, c, tc.allowed[i])
				}
			}
		})
	}
}

// TestSamplerDistribution: at temperature 1 the frequencies follow the
// softmax; at temperature 0.5 they follow the squared probabilities.
func TestSamplerDistribution(t *testing.T) {
	logits := []float32{0, float32(math.Ln2), float32(math.Log(3))} // 1/6, 2/6, 3/6
	const n = 60000
	for _, tc := range []struct {
		temp float64
		want []float64
	}{{1, []float64{1. / 6, 2. / 6, 3. / 6}}, {0.5, []float64{1. / 14, 4. / 14, 9. / 14}}} {
		counts := draw(newSampler(Sampling{Temperature: tc.temp, Seed: 11}, nil), logits, n)
		for i, c := range counts {
			if got := float64(c) / n; math.Abs(got-tc.want[i]) > 0.01 {
				t.Errorf("temperature %g: token %d frequency %.4f, want %.4f", tc.temp, i, got, tc.want[i])
			}
		}
	}
}

func TestSamplerPenalties(t *testing.T) {
	// Repetition: token 0 (seen in the prompt) 2.0 -> 1.0 loses to token 1's 1.9.
	s := newSampler(Sampling{RepetitionPenalty: 2}, []int32{0})
	if got := s.sample([]float32{2, 1.9}); got != 1 {
		t.Errorf("repetition penalty: got %d, want 1", got)
	}
	// A negative logit is multiplied: -1 -> -2 loses to token 1's -1.5.
	if got := s.sample([]float32{-1, -1.5}); got != 1 {
		t.Errorf("repetition penalty on negative logits: got %d, want 1", got)
	}
	// Presence and frequency apply to output tokens only: token 0 generated
	// twice loses 0.5 + 2*0.4 = 1.3.
	s = newSampler(Sampling{PresencePenalty: 0.5, FrequencyPenalty: 0.4}, []int32{1})
	s.observe(0)
	s.observe(0)
	if got := s.sample([]float32{2, 0.8}); got != 1 {
		t.Errorf("presence+frequency: got %d, want 1", got)
	}
	if got := s.sample([]float32{2, 0.6}); got != 0 {
		t.Errorf("presence+frequency: got %d, want 0 (2-1.3 = 0.7 > 0.6)", got)
	}
}

func TestSamplerSeed(t *testing.T) {
	logits := make([]float32, 50)
	for i := range logits {
		logits[i] = float32(i%7) * 0.3
	}
	p := Sampling{Temperature: 1, Seed: 99}
	a, b := newSampler(p, nil), newSampler(p, nil)
	c := newSampler(Sampling{Temperature: 1, Seed: 100}, nil)
	same, diff := true, false
	for range 200 {
		x, y, z := a.sample(logits), b.sample(logits), c.sample(logits)
		same = same && x == y
		diff = diff || x != z
	}
	if !same || !diff {
		t.Fatalf("same seed same stream: %v; other seed differs: %v", same, diff)
	}
}

func TestLogprobs(t *testing.T) {
	logits := []float32{0, float32(math.Ln2), float32(math.Log(3)), float32(math.Ln2)}
	lp, top := logprobs(logits, 1, 3)
	if want := math.Log(2.0 / 8); math.Abs(float64(lp)-want) > 1e-6 {
		t.Errorf("logprob %g, want %g", lp, want)
	}
	wantTop := []int32{2, 1, 3} // equal logits keep token order
	for i, e := range top {
		if e.Token != wantTop[i] {
			t.Fatalf("top %v, want tokens %v", top, wantTop)
		}
	}
	if want := math.Log(3.0 / 8); math.Abs(float64(top[0].Logprob)-want) > 1e-6 {
		t.Errorf("top logprob %g, want %g", top[0].Logprob, want)
	}
}

// TestVerifyPreservesDistribution: tokens drafted from q and passed through
// the speculative rule are distributed as the target p, for a q unlike p and
// for a one-hot q (n-gram drafts).
func TestVerifyPreservesDistribution(t *testing.T) {
	target := []float32{0, float32(math.Ln2), float32(math.Log(3)), float32(math.Log(4))} // p = 1,2,3,4 / 10
	want := []float64{0.1, 0.2, 0.3, 0.4}
	drafts := map[string]dist{
		"skewed q":  {idx: []int32{0, 1, 2, 3}, p: []float64{0.55, 0.05, 0.3, 0.1}},
		"one-hot q": {idx: []int32{1}, p: []float64{1}},
	}
	for name, q := range drafts {
		s := newSampler(Sampling{Temperature: 1, Seed: 5}, nil)
		const n = 80000
		counts := make([]int, 4)
		accepted := 0
		for range n {
			d := s.draw(q)
			tok, ok := s.verify(target, d, q)
			counts[tok]++
			if ok {
				accepted++
			}
		}
		for i, c := range counts {
			if got := float64(c) / n; math.Abs(got-want[i]) > 0.01 {
				t.Errorf("%s: token %d frequency %.4f, want %.2f", name, i, got, want[i])
			}
		}
		// Acceptance rate is sum_x min(p(x), q(x)).
		var wantAcc float64
		for i, x := range q.idx {
			wantAcc += math.Min(q.p[i], want[x])
		}
		if got := float64(accepted) / n; math.Abs(got-wantAcc) > 0.01 {
			t.Errorf("%s: acceptance %.4f, want %.4f", name, got, wantAcc)
		}
	}
	// Greedy: accepted exactly when the draft is the argmax.
	g := newSampler(Sampling{}, nil)
	if tok, ok := g.verify(target, 3, dist{}); tok != 3 || !ok {
		t.Errorf("greedy verify of the argmax: %d %v", tok, ok)
	}
	if tok, ok := g.verify(target, 1, dist{}); tok != 3 || ok {
		t.Errorf("greedy verify of another token: %d %v", tok, ok)
	}
}

// sortedDistribution is the distribution by a full sort of the vocabulary
// (how the sampler once made it): the reference the partial selection
// must agree with.
func sortedDistribution(x []float32, p Sampling) map[int32]float64 {
	inv := float32(1 / p.Temperature)
	y := make([]float32, len(x))
	idx := make([]int32, len(x))
	for i := range x {
		y[i], idx[i] = x[i]*inv, int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		if y[a] != y[b] {
			if y[a] > y[b] {
				return -1
			}
			return 1
		}
		return int(a - b)
	})
	k := len(idx)
	if p.TopK > 0 && p.TopK < k {
		k = p.TopK
	}
	idx = idx[:k]
	mx := float64(y[idx[0]])
	probs := make([]float64, k)
	var sum float64
	for i, t := range idx {
		probs[i] = math.Exp(float64(y[t]) - mx)
		sum += probs[i]
	}
	n := k
	for i := range probs {
		probs[i] /= sum
	}
	if p.TopP > 0 && p.TopP < 1 {
		var c float64
		for i, q := range probs {
			if c += q; c >= p.TopP {
				n = i + 1
				break
			}
		}
	}
	if p.MinP > 0 {
		for i := 1; i < n; i++ {
			if probs[i] < p.MinP*probs[0] {
				n = i
				break
			}
		}
	}
	var total float64
	for _, q := range probs[:n] {
		total += q
	}
	out := map[int32]float64{}
	for i, t := range idx[:n] {
		out[t] = probs[i] / total
	}
	return out
}

// TestDistributionMatchesSort: selecting candidates by heaps and filters
// gives the distribution a full sort gives (same tokens, probabilities
// equal up to the order of summation), for every combination of cuts,
// with ties in the logits.
func TestDistributionMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for trial := range 200 {
		V := 1 + r.IntN(3000)
		x := make([]float32, V)
		for i := range x {
			x[i] = float32(math.Round(r.NormFloat64()*8) / 4) // many ties
		}
		p := Sampling{Temperature: 0.3 + r.Float64()*1.5}
		switch trial % 8 {
		case 1:
			p.TopK = 1 + r.IntN(V)
		case 2:
			p.TopP = r.Float64()
		case 3:
			p.MinP = r.Float64() * 0.5
		case 4:
			p.TopK, p.TopP = 1+r.IntN(V), r.Float64()
		case 5:
			p.TopP, p.MinP = r.Float64(), r.Float64()*0.5
		case 6:
			p.TopK, p.TopP, p.MinP = 1+r.IntN(V), r.Float64(), r.Float64()*0.5
		case 7:
			p.TopK, p.MinP = 1+r.IntN(V), r.Float64()*0.5
		}
		want := sortedDistribution(x, p)
		d := newSampler(p, nil).distribution(x)
		got := map[int32]float64{}
		var total float64
		for i, tok := range d.idx {
			if d.p[i] > 0 || want[tok] > 0 {
				got[tok] = d.p[i]
			}
			total += d.p[i]
		}
		for tok, q := range want {
			if q == 0 {
				delete(want, tok)
			}
		}
		if len(got) != len(want) || math.Abs(total-1) > 1e-9 {
			t.Fatalf("trial %d (%+v, V=%d): %d candidates (mass %g), want %d", trial, p, V, len(got), total, len(want))
		}
		for tok, q := range want {
			if g, ok := got[tok]; !ok || math.Abs(g-q) > 1e-12+1e-9*q {
				t.Fatalf("trial %d (%+v): token %d probability %g, want %g", trial, p, tok, g, q)
			}
		}
	}
}

// BenchmarkDistribution: one sampling distribution over DeepSeek-V4's
// vocabulary (129280), by partial selection and, for comparison, by the
// full sort it replaced.
func BenchmarkDistribution(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 5))
	x := make([]float32, 129280)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 3)
	}
	for _, p := range []Sampling{{Temperature: 0.8, TopP: 0.95}, {Temperature: 0.8, TopK: 40}, {Temperature: 0.8, MinP: 0.05}, {Temperature: 0.8}} {
		name := fmt.Sprintf("topk=%d,topp=%g,minp=%g", p.TopK, p.TopP, p.MinP)
		b.Run(name+"/select", func(b *testing.B) {
			s := newSampler(p, nil)
			for range b.N {
				s.distribution(x)
			}
		})
		b.Run(name+"/sort", func(b *testing.B) {
			for range b.N {
				sortedDistribution(x, p)
			}
		})
	}
}
