package compute

// KDA is Kimi Delta Attention's recurrence (Kimi Linear, spec/models/
// kimi-linear.md §4): the gated delta rule of Recurrent with a decay per
// key channel instead of per head. Its short convolution is Recurrent's
// CausalConv. A model of the family checks at load that its backend
// implements KDA (and Recurrent); the CPU backend does.
type KDA interface {
	// KDARule runs the per-channel gated delta rule token by token over
	// every span (see KDAArgs), each head of each span from its state
	// slot, overwriting the slot with the state after the span's last
	// token:
	//
	//	S ← diag(e^g)·S;  S ← S + k̂ ⊗ β(v − Sᵀk̂);  o = Sᵀq̂
	//
	// in float32. A span's state is read before its first token and
	// written after its last, so a sequence fed in any split of steps,
	// alone or in any batch, computes the same bits.
	KDARule(a *KDAArgs, sp Spans)
}

// KDAArgs are one KDA layer's inputs. For every token t, head h and key
// channel i:
//
//	q̂ = q·(Σq² + 1e-6)^(-1/2)·Dk^(-1/2);   k̂ = k·(Σk² + 1e-6)^(-1/2)
//	g_i = NegA[h]·softplus(A[t][h·Dk+i] + DtBias[h·Dk+i]);   β = sigmoid(B[t][h])
//
// with q, k and v the columns [0, H·Dk), [H·Dk, 2H·Dk) and [2H·Dk,
// 2H·Dk + H·Dv) of QKV (each head's values consecutive).
type KDAArgs struct {
	Out Tensor // F32 [T, H·Dv]
	QKV Tensor // F32 [T, 2·H·Dk + H·Dv]
	A   Tensor // F32 [T, H·Dk]: the decay projection (f_b_proj·f_a_proj x)
	B   Tensor // F32 [T, H]: the write-strength projection (b_proj x)
	// NegA is F32 [H]: −exp(A_log); DtBias F32 [H·Dk].
	NegA, DtBias Tensor
	// State holds H slots per span, head h's Dk×Dv state (row-major, Dk
	// rows of Dv: row i is key channel i) in slot h, always F32.
	State     Paged
	H, Dk, Dv int
}
