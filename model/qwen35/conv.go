package qwen35

import "fmt"

// CausalConv1D is the short causal convolution of a Gated DeltaNet layer
// (spec §4) over T consecutive inputs of one sequence, continuing from its
// state.
//
// x and y are [T, C]; w is the depthwise kernel, tap-major [K, C]; state
// holds the sequence's K-1 previous inputs, oldest first, [K-1, C] (zeros
// at the start of a sequence). With h the concatenation of state and x
// ([K-1+T, C]), the output is
//
//	y[t][c] = Σ_{j<K} w[j][c] · h[t+j][c]
//
// summed in order of j in float32, and state becomes the last K-1 rows of
// h. The arithmetic does not depend on T: feeding a sequence token by token
// or in chunks of any size gives the same bits. y must not alias x.
func CausalConv1D(y, x []float32, T, C, K int, w, state []float32) {
	if len(x) < T*C || len(y) < T*C || len(w) != K*C || len(state) != (K-1)*C {
		panic(fmt.Sprintf("qwen35: CausalConv1D: x %d, y %d, w %d, state %d for T %d, C %d, K %d", len(x), len(y), len(w), len(state), T, C, K))
	}
	hist := K - 1
	row := func(i int) []float32 { // row i of h
		if i < hist {
			return state[i*C : (i+1)*C]
		}
		i -= hist
		return x[i*C : (i+1)*C]
	}
	for t := range T {
		yt := y[t*C : (t+1)*C]
		clear(yt)
		for j := range K {
			wj, hj := w[j*C:(j+1)*C], row(t+j)
			for c := range yt {
				yt[c] += wj[c] * hj[c]
			}
		}
	}
	// The new state is rows [T, T+K-1) of h.
	if T >= hist {
		copy(state, x[(T-hist)*C:T*C])
		return
	}
	copy(state, state[T*C:])
	copy(state[(hist-T)*C:], x[:T*C])
}
