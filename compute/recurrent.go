package compute

// Recurrent is the state-carrying part of linear-attention layers (Qwen3.5's
// Gated DeltaNet): a short causal convolution and the gated delta rule, each
// continuing every span's sequence from the state in its recurrent cache
// slots and overwriting that state with the one after the span's last token.
// A span's state is read before the span's first token and written after
// its last, so a sequence fed in any split of steps, alone or in any batch,
// computes the same bits as long as the same form of the rule is used (the
// token-by-token form is split-invariant; the chunked form only at splits
// on its chunk boundaries).
type Recurrent interface {
	// CausalConv runs a depthwise causal convolution of K taps over every
	// span's rows of X [T, C], continuing from the span's K-1 previous
	// inputs in State (slot j holds the j-th oldest, zeros at the start of
	// a sequence): with h the concatenation of the history and the span's
	// rows,
	//
	//	Y[t][c] = act(Σ_{j<K} W[j][c] · h[t+j][c])
	//
	// summed in order of j in float32 (act is SiLU or the identity), and
	// the state becomes the last K-1 rows of h. Y must not alias X.
	CausalConv(a *ConvArgs, sp Spans)
	// DeltaRule runs the gated delta rule token by token (the recurrent
	// form) over every span (see DeltaArgs), each value head of each span
	// from its state slot:
	//
	//	S ← e^g·S;  S ← S + k̂ ⊗ β(v − Sᵀk̂);  o = Sᵀq̂
	//
	// in float32.
	DeltaRule(a *DeltaArgs, sp Spans)
	// DeltaRuleChunked computes what DeltaRule computes in the chunked
	// form (chunks of chunk tokens, ending at multiples of chunk counted
	// from position 0, so that a sequence split at such multiples gives
	// the bits of one feed): per chunk, with Γ the in-chunk cumulative g,
	//
	//	A_ij = β_i (k̂_i·k̂_j) e^{Γ_i−Γ_j} (j < i);  T = (I + A)⁻¹
	//	U = T(βv);  W = T(βk̂ e^Γ);  v' = U − W S
	//	o = (q̂ e^Γ) S + M v',  M_ij = (q̂_i·k̂_j) e^{Γ_i−Γ_j} (j ≤ i)
	//	S ← e^{Γ_last} S + Σ_j (k̂_j e^{Γ_last−Γ_j}) ⊗ v'_j
	//
	// It equals DeltaRule up to float32 rounding, not bit for bit.
	DeltaRuleChunked(a *DeltaArgs, sp Spans, chunk int)
	// GatedRMSNorm computes, for every row r of x [R, n], y[r] = w ⊙ x[r] /
	// sqrt(mean(x[r]²) + eps) ⊙ silu(z[r]) (the Gated DeltaNet output norm;
	// w [n] is the plain weight). y may alias x.
	GatedRMSNorm(y, x, z, w Tensor, eps float32)
}

// ConvArgs are one causal convolution's inputs.
type ConvArgs struct {
	Y, X Tensor // F32 [T, C]
	// W is the depthwise kernel, tap-major: F32 [K, C], row K-1 multiplying
	// the newest input.
	W Tensor
	// State holds K-1 slots of C values per span (Format f32 or bf16);
	// the zero Paged when K is 1.
	State Paged
	SiLU  bool // apply SiLU to the output
}

// DeltaArgs are one gated delta rule's inputs (Qwen3.5's Gated DeltaNet,
// spec §4). For every token t and value head h (reading key head
// h/(Hv/Hk)):
//
//	q̂ = q·(Σq² + 1e-6)^(-1/2)·Dk^(-1/2);   k̂ = k·(Σk² + 1e-6)^(-1/2)
//	g = NegA[h]·softplus(A[t][h] + DtBias[h]);   β = sigmoid(B[t][h])
//
// with q, k and v the columns [0, Hk·Dk), [Hk·Dk, 2Hk·Dk) and [2Hk·Dk,
// 2Hk·Dk + Hv·Dv) of QKV (each head's Dk or Dv values consecutive).
type DeltaArgs struct {
	Out          Tensor // F32 [T, Hv·Dv]
	QKV          Tensor // F32 [T, 2·Hk·Dk + Hv·Dv]
	A, B         Tensor // F32 [T, Hv]: the decay and write-strength projections
	NegA, DtBias Tensor // F32 [Hv]: −exp(A_log), and the decay's bias
	// State holds Hv slots per span, head h's Dk×Dv state (row-major, Dk
	// rows of Dv) in slot h, always F32.
	State          Paged
	Hk, Hv, Dk, Dv int
}
