package compute

// Gating is the row-wise glue of gated layers: splitting a projection's
// per-head halves, sigmoid gates, and a dense SwiGLU feed-forward.
type Gating interface {
	// SplitHalves splits every row of x [T, m·2n] into m blocks of 2n
	// values and writes the first n of block i to a[t][i·n:(i+1)·n], the
	// second n to b[t][i·n:(i+1)·n] (a and b are [T, m·n]).
	SplitHalves(a, b, x Tensor, n int)
	// MulSigmoid computes y ⊙= sigmoid(g) (same shapes).
	MulSigmoid(y, g Tensor)
	// SwiGLU computes y = W2·(silu(W1·x) ⊙ W3·x) for every row of x (a
	// dense FFN; the experts of MoE compute the same).
	SwiGLU(y, x Tensor, w *SwiGLU)
}
