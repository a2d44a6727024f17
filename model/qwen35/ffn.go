package qwen35

// mlp computes Down·(silu(Gate·x) ⊙ Up·x) for n rows of x [n, D] (spec §5).
func (m *Model) mlp(w *MLP, x []float32, n int) []float32 {
	I := w.Gate.Rows
	g := make([]float32, n*I)
	u := make([]float32, n*I)
	m.be.MatMulF32(g, x, n, w.Gate)
	m.be.MatMulF32(u, x, n, w.Up)
	for i := range g {
		g[i] = silu(g[i]) * u[i]
	}
	y := make([]float32, n*w.Down.Rows)
	m.be.MatMulF32(y, g, n, w.Down)
	return y
}

// moe is Qwen3.5-MoE's FFN on x [T, D] (spec §5): the router's softmax over
// the E experts (float32), the top k renormalised to sum to one, each
// expert's SwiGLU run once over the tokens routed to it, plus the shared
// expert scaled by sigmoid of its one-scalar gate. A token's routed outputs
// are added in expert order, then the shared expert's, whatever the other
// tokens of the batch, so rows do not depend on the batch.
func (m *Model) moe(w *MoE, x []float32, T int) []float32 {
	cfg := m.Cfg
	D, E, K := cfg.Hidden, cfg.Experts, cfg.ExpertsPerTok
	p := make([]float32, T*E)
	m.be.MatMulF32(p, x, T, w.Router)
	m.be.SoftmaxF32(p, T, E)
	idx := make([]int32, T*K)
	wt := make([]float32, T*K)
	for t := range T {
		pt, it := p[t*E:(t+1)*E], idx[t*K:(t+1)*K]
		m.be.TopK(it, pt, K)
		var sum float32
		for _, e := range it {
			sum += pt[e]
		}
		for k, e := range it {
			wt[t*K+k] = pt[e] / sum
		}
	}
	byExpert := make([][]int32, E) // entries t*K+k, in token order
	for i, e := range idx {
		byExpert[e] = append(byExpert[e], int32(i))
	}
	y := make([]float32, T*D)
	xe := make([]float32, T*D)
	for e, list := range byExpert {
		if len(list) == 0 {
			continue
		}
		for i, tk := range list {
			t := int(tk) / K
			copy(xe[i*D:(i+1)*D], x[t*D:(t+1)*D])
		}
		ye := m.mlp(&w.Experts[e], xe[:len(list)*D], len(list))
		for i, tk := range list {
			t := int(tk) / K
			axpy(y[t*D:(t+1)*D], wt[tk], ye[i*D:(i+1)*D])
		}
	}
	shared := m.mlp(&w.Shared, x, T)
	gate := make([]float32, T)
	m.be.MatMulF32(gate, x, T, w.SharedGate)
	for t := range T {
		axpy(y[t*D:(t+1)*D], sigmoid(gate[t]), shared[t*D:(t+1)*D])
	}
	return y
}
