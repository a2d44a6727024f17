package deepseekv4

import "math"

// moe runs the mixture of experts on x [T, D] (the ffn_norm output) and
// returns [T, D] (spec §3, "MoE"). Tokens are grouped by expert so each
// expert's matmuls run once over all the tokens routed to it.
func (m *Model) moe(w *MoE, x []float32, tokens []int32) []float32 {
	cfg := m.Cfg
	T, D, E, K := len(tokens), cfg.Hidden, cfg.Experts, cfg.ExpertsPerTok
	scores := m.s.get(T * E)
	m.be.MatMul(scores, x, T, w.Gate)
	for t := range T {
		score(scores[t*E:(t+1)*E], cfg.Scoring)
	}

	// Route: per token K experts and their weights.
	idx := make([]int32, T*K)
	wt := make([]float32, T*K)
	biased := make([]float32, E)
	for t := range T {
		s := scores[t*E : (t+1)*E]
		it := idx[t*K : (t+1)*K]
		if w.Tid2Eid != nil {
			copy(it, w.Tid2Eid[int(tokens[t])*K:(int(tokens[t])+1)*K])
		} else {
			for e := range biased {
				biased[e] = s[e] + w.Bias[e]
			}
			m.be.TopK(it, biased, K)
		}
		var sum float32
		for k, e := range it {
			wt[t*K+k] = s[e]
			sum += s[e]
		}
		for k := range K {
			wt[t*K+k] = wt[t*K+k] / (sum + 1e-20) * float32(cfg.RoutedScale)
		}
	}

	// Group tokens by expert.
	byExpert := make([][]int32, E) // entries t*K+k
	for i, e := range idx {
		byExpert[e] = append(byExpert[e], int32(i))
	}
	y := m.s.get(T * D)
	xe := m.s.get(T * D)
	ye := m.s.get(T * D)
	for e, list := range byExpert {
		if len(list) == 0 {
			continue
		}
		n := len(list)
		for i, tk := range list {
			t := int(tk) / K
			copy(xe[i*D:(i+1)*D], x[t*D:(t+1)*D])
		}
		m.swiglu(&w.Experts[e], ye[:n*D], xe[:n*D], n)
		for i, tk := range list {
			t := int(tk) / K
			axpy(y[t*D:(t+1)*D], wt[tk], ye[i*D:(i+1)*D])
		}
	}
	shared := m.s.get(T * D)
	m.swiglu(&w.Shared, shared, x, T)
	for i := range y {
		y[i] += shared[i]
	}
	return y
}

// swiglu computes w2·(silu(min(w1·x, L)) ⊙ clamp(w3·x, -L, L)) for n rows.
func (m *Model) swiglu(ex *Expert, y, x []float32, n int) {
	I := ex.W1.Rows
	g := m.s.get(n * I)
	u := m.s.get(n * I)
	m.be.MatMul(g, x, n, ex.W1)
	m.be.MatMul(u, x, n, ex.W3)
	L := float32(m.Cfg.SwigluLimit)
	for i := range g {
		gv := min(g[i], L)
		uv := min(max(u[i], -L), L)
		g[i] = gv * sigmoid(gv) * uv
	}
	m.be.MatMul(y, g, n, ex.W2)
}

// score applies the router's scoring function to logits in place.
func score(s []float32, fn string) {
	switch fn {
	case "sqrtsoftplus":
		for i, v := range s {
			s[i] = float32(math.Sqrt(softplus(float64(v))))
		}
	case "sigmoid":
		for i, v := range s {
			s[i] = sigmoid(v)
		}
	case "softmax":
		softmaxInPlace(s)
	}
}

// softplus is log(1+e^x) with PyTorch's threshold: x itself above 20.
func softplus(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
}
