package compute

// GeGLU is the element-wise algebra of GELU-gated feed-forwards and the
// routed experts built from them (Gemma 4), and of capped logits. It is not
// part of Backend: a model that needs it asserts it at load.
//
// GELU here is PyTorch's tanh approximation ("gelu_pytorch_tanh"),
// gelu(x) = x/2 · (1 + tanh(sqrt(2/π)·(x + 0.044715·x³))), computed in
// float64 and rounded to float32.
type GeGLU interface {
	// GeluMul computes y = gelu(gate) ⊙ up (all of one shape); y may alias
	// gate or up.
	GeluMul(y, gate, up Tensor)
	// MulScalar multiplies every element of x by s in place.
	MulScalar(x Tensor, s float32)
	// TanhCap replaces every element of x by c·tanh(x/c) (tanh in float64,
	// rounded to float32).
	TanhCap(x Tensor, c float32)
	// GeluExperts routes every token t by its router logits [T, E] and runs
	// its experts on x [T, D] into y [T, D] (see GeluExpertsArgs).
	GeluExperts(y, x, logits Tensor, a *GeluExpertsArgs)
}

// GeluExpert is one routed expert: GateUp [2I, D] holds the gate
// projection's rows then the up projection's, Down is [D, I].
type GeluExpert struct{ GateUp, Down *Matrix }

// GeluExpertsArgs are a routed-experts block. For each token, p =
// softmax(logits[t]) (exponentials in float64), its K largest
// probabilities are kept (ties to the lower expert), renormalized to sum
// to one, and multiplied by PerExpertScale[e]; then
//
//	y[t] = Σ_k w_k · Down_e(gelu(Gate_e·x[t]) ⊙ Up_e·x[t])
//
// summed in the order of the experts' rank. Each expert's products run once
// over the tokens routed to it.
type GeluExpertsArgs struct {
	Experts        []GeluExpert
	PerExpertScale Tensor // F32 [E]
	K              int
}
